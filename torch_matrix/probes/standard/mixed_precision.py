"""autocast on CPU (bfloat16) and CUDA (float16), and where GradScaler lives in this version."""

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import caught_warnings, first_line

REPRO = """import torch
model = torch.nn.Linear(8, 4)
with torch.autocast("cpu", dtype=torch.bfloat16):      # torch 1.10-1.x also: torch.cpu.amp.autocast()
    out = model(torch.randn(2, 8))
print(out.dtype)                                        # torch.bfloat16
scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
"""


def autocast_context(torch, device, dtype):
    """(context manager, API name) for autocast on ``device``; None where this version has none."""
    if hasattr(torch, "autocast"):
        return torch.autocast(device, dtype=dtype), "torch.autocast(%r)" % device
    if (
        device == "cpu"
        and hasattr(torch, "cpu")
        and hasattr(getattr(torch.cpu, "amp", None), "autocast")
    ):
        return torch.cpu.amp.autocast(dtype=dtype), "torch.cpu.amp.autocast"
    if device == "cuda" and hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "autocast"):
        return torch.cuda.amp.autocast(), "torch.cuda.amp.autocast"
    return None, ""


def autocast_step(torch, device, dtype):
    """Forward under autocast, backward outside; returns (api, output dtype) or raises Fail."""
    context, api = autocast_context(torch, device, dtype)
    if context is None:
        return None, None
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).to(
        device
    )
    with context:
        out = model(torch.randn(2, 8, device=device))
        loss = out.float().pow(2).mean()
    loss.backward()
    if out.dtype != dtype:
        raise Fail(
            "autocast on %s produced %s" % (device, out.dtype),
            observed=str(out.dtype),
            expected=str(dtype),
            repro=REPRO,
        )
    if not all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()):
        raise Fail(
            "non-finite gradients after autocast on %s" % device,
            observed="inf/nan grads",
            expected="finite",
            repro=REPRO,
        )
    return api, str(out.dtype)


def grad_scaler_locations(torch):
    """Where GradScaler can be imported from, and whether the old location warns."""
    found = {}
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        found["torch.amp.GradScaler"] = "present"
    if hasattr(torch.cuda, "amp") and hasattr(torch.cuda.amp, "GradScaler"):
        with caught_warnings() as warned:
            try:
                torch.cuda.amp.GradScaler(enabled=False)
                found["torch.cuda.amp.GradScaler"] = "present"
            except Exception as exc:
                found["torch.cuda.amp.GradScaler"] = first_line(exc)
        if warned:
            found["torch.cuda.amp.GradScaler"] += ", warns: " + warned[0]
    return found


@probe(
    "mixed_precision",
    doc="autocast CPU bfloat16 and CUDA float16 forward/backward with GradScaler; records "
    "where GradScaler lives (torch.amp vs torch.cuda.amp)",
)
def mixed_precision(ctx):
    import torch

    facts = {"grad_scaler": grad_scaler_locations(torch)}
    try:
        cpu_api, cpu_dtype = autocast_step(torch, "cpu", torch.bfloat16)
    except (RuntimeError, TypeError) as exc:  # older builds reject CPU autocast arguments
        cpu_api, cpu_dtype = None, None
        facts["cpu_autocast_error"] = first_line(exc)
    facts["cpu_autocast"] = cpu_api or "unsupported"
    if cpu_dtype:
        facts["cpu_output_dtype"] = cpu_dtype
    if ctx.cuda_available():
        cuda_api, cuda_dtype = autocast_step(torch, "cuda", torch.float16)
        facts.update(cuda_autocast=cuda_api, cuda_output_dtype=cuda_dtype)
        scaler = (
            torch.amp.GradScaler("cuda")
            if "torch.amp.GradScaler" in facts["grad_scaler"]
            else torch.cuda.amp.GradScaler()
        )
        model = torch.nn.Linear(8, 4).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with autocast_context(torch, "cuda", torch.float16)[0]:
            loss = model(torch.randn(2, 8, device="cuda")).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        facts["grad_scaler_scale_after_step"] = float(scaler.get_scale())
    elif cpu_api is None:
        raise Unsupported(
            "no CPU autocast in this version and no CUDA device for the CUDA one", evidence=facts
        )
    if not facts["grad_scaler"]:
        raise Unsupported("no GradScaler in this version", evidence=facts)
    return facts
