"""A downstream check: a training checkpoint written the way yolov5-style code writes it
(numpy scalars next to the state dict) loads back with a plain ``torch.load(path)``."""

from torch_matrix.probes.api import Fail, probe

REPRO = """import io, numpy, torch
buffer = io.BytesIO()
torch.save({"epoch": 3, "best_fitness": numpy.float64(0.5), "model": torch.nn.Linear(2, 2).state_dict()}, buffer)
buffer.seek(0)
print(torch.load(buffer)["best_fitness"])  # a plain call, as downstream training scripts write it
"""


@probe(
    "plain_torch_load",
    doc="a checkpoint holding numpy scalars loads with torch.load(f) and no weights_only argument",
)
def plain_torch_load(ctx):
    import io

    import numpy
    import torch

    buffer = io.BytesIO()
    torch.save(
        {
            "epoch": 3,
            "best_fitness": numpy.float64(0.5),
            "model": torch.nn.Linear(2, 2).state_dict(),
        },
        buffer,
    )
    buffer.seek(0)
    try:
        loaded = torch.load(buffer)
    except Exception as error:  # noqa: BLE001 - any failure of the plain call is the finding
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise Fail(
            "plain torch.load failed: %s: %s" % (type(error).__name__, first[:200]),
            observed=type(error).__name__,
            expected="the checkpoint",
            repro=REPRO,
        )
    return {"best_fitness": float(loaded["best_fitness"])}
