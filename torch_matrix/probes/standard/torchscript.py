"""TorchScript: trace and script a small model, save, load, and get the same outputs."""

import os

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import caught_warnings, first_line, scratch_dir

REPRO = """import torch
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 2)).eval()
x = torch.randn(1, 3, 6, 6)
with torch.no_grad():
    traced = torch.jit.trace(model, x)
torch.jit.save(traced, "traced.pt")
print(torch.allclose(torch.jit.load("traced.pt")(x), model(x)))
"""


def clipped(x: float) -> float:
    return x if x > 0.0 else -x


@probe("torchscript", doc="torch.jit.trace and torch.jit.script, save, load, same outputs")
def torchscript(ctx):
    import torch

    if not hasattr(torch, "jit") or not hasattr(torch.jit, "trace"):
        raise Unsupported("torch.jit is not in this version")
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2)).eval()
    x = torch.randn(1, 3, 6, 6)
    workdir = scratch_dir(ctx)
    path = os.path.join(workdir, "traced.pt")
    with caught_warnings() as warned:
        try:
            with torch.no_grad():
                traced = torch.jit.trace(model, x)
                torch.jit.save(traced, path)
                loaded = torch.jit.load(path)
                same = torch.allclose(loaded(x), model(x), atol=1e-6)
        except Exception as exc:
            raise Fail(
                "trace/save/load failed: %s" % first_line(exc),
                observed=first_line(exc),
                expected="a loadable traced module",
                repro=REPRO,
            )
        try:
            scripted = torch.jit.script(clipped)
            script_ok = scripted(-2.0) == 2.0
        except Exception as exc:
            script_ok = first_line(exc)
    if not same:
        raise Fail(
            "the loaded traced module computes something else",
            observed="outputs differ",
            expected="allclose to eager",
            repro=REPRO,
        )
    if script_ok is not True:
        raise Fail(
            "torch.jit.script of a small function failed",
            observed=script_ok,
            expected=True,
            repro="import torch\n@torch.jit.script\ndef f(x: float) -> float:\n    return x if x > 0.0 else -x\n"
            "print(f(-2.0))",
        )
    return {"file_bytes": os.path.getsize(path), "warnings": sorted(set(warned))[:3]}
