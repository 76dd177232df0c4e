"""tinytrain: a tiny model, its checkpoints, a data loader and yolov5-style device selection."""

__version__ = "0.1.0"
