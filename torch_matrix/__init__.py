"""torch-matrix: install many torch/torchvision/CUDA/Python combinations, probe each, derive pins.

Data flows one way: spec -> plan -> cells -> results -> report and pins.
"""

__version__ = "0.1.0"
