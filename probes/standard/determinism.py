"""Deterministic algorithms: which API exists, bitwise-identical reruns, which ops refuse, cuBLAS workspace."""

import os

from probes.api import Fail, Unsupported, probe
from probes.standard._util import first_line, run_in_children

REPRO = """import torch, torch.nn as nn
torch.use_deterministic_algorithms(True)   # torch 1.7: torch.set_deterministic(True)
def run():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1); x = torch.randn(4, 3, 4, 4); y = torch.randint(0, 2, (4,))
    for _ in range(3):
        opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
    return [p.detach().clone() for p in m.parameters()]
print(all(torch.equal(a, b) for a, b in zip(run(), run())))
"""


def deterministic_api(torch):
    """(name, enable, disable) for the deterministic-algorithms switch this version offers."""
    if hasattr(torch, "use_deterministic_algorithms"):
        return ("torch.use_deterministic_algorithms", lambda: torch.use_deterministic_algorithms(True),
                lambda: torch.use_deterministic_algorithms(False))
    if hasattr(torch, "set_deterministic"):
        return ("torch.set_deterministic", lambda: torch.set_deterministic(True),
                lambda: torch.set_deterministic(False))
    return None


def seeded_run(torch, device):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 4, 4).to(device), torch.randint(0, 2, (4,)).to(device)
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return [p.detach().cpu().clone() for p in model.parameters()]


def common_ops(torch, device):
    """Small calls to ops that are known to lack deterministic kernels on some device."""
    F = torch.nn.functional

    def grad_of(fn, *shape):
        x = torch.randn(*shape, device=device, requires_grad=True)
        fn(x).sum().backward()

    return {
        "replication_pad2d_backward": lambda: grad_of(lambda x: F.pad(x, (1, 1, 1, 1), mode="replicate"), 1, 1, 4, 4),
        "interpolate_bilinear_backward": lambda: grad_of(
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), 1, 1, 4, 4),
        "adaptive_avg_pool2d_backward": lambda: grad_of(lambda x: F.adaptive_avg_pool2d(x, 3), 1, 1, 5, 5),
        "index_add_": lambda: torch.zeros(4, device=device).index_add_(
            0, torch.tensor([0, 0, 1], device=device), torch.ones(3, device=device)),
        "scatter_add_": lambda: torch.zeros(4, device=device).scatter_add_(
            0, torch.tensor([0, 0, 1], device=device), torch.ones(3, device=device)),
        "embedding_bag_backward": lambda: F.embedding_bag(
            torch.tensor([0, 1, 1], device=device), torch.randn(3, 2, device=device, requires_grad=True),
            torch.tensor([0], device=device), mode="max").sum().backward(),
        "bincount": lambda: torch.bincount(torch.tensor([0, 1, 1], device=device)),
        "cumsum": lambda: torch.cumsum(torch.ones(4, device=device), 0),
    }


def cublas_child(workspace_config):
    """In a fresh child: set (or unset) CUBLAS_WORKSPACE_CONFIG, enable determinism, run a CUDA matmul."""
    if workspace_config is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace_config
    import torch

    deterministic_api(torch)[1]()
    try:
        a = torch.randn(8, 8, device="cuda")
        (a @ a).sum().item()
        return "ok"
    except RuntimeError as exc:
        return first_line(exc)


@probe("determinism", doc="deterministic-algorithms API, seeded training bitwise identical twice, ops that "
                          "refuse under determinism, CUBLAS_WORKSPACE_CONFIG on CUDA", timeout=240)
def determinism(ctx):
    import torch

    api = deterministic_api(torch)
    if api is None:
        raise Unsupported("neither torch.use_deterministic_algorithms nor torch.set_deterministic exists")
    name, enable, disable = api
    facts = {"api": name}
    cuda = ctx.cuda_available()
    device = "cuda" if cuda else "cpu"
    facts["device"] = device
    if cuda:
        # Fresh (spawned) children: is_available() above already ran cuInit here, so forked ones could not
        # use CUDA, and each child must set the variable before its own cuBLAS starts.
        outcomes = run_in_children(cublas_child, [[None], [":4096:8"]], timeout=150, start_method="spawn")
        summary = [detail if kind == "ok" else "%s: %s" % (kind, str(detail).splitlines()[0][:200])
                   for kind, detail in outcomes]
        facts["cublas_without_workspace_config"], facts["cublas_with_workspace_config_4096_8"] = summary
        # torch reads the variable at each check, so setting it now covers the seeded run below.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        facts["cublas_workspace_config_used"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    enable()
    try:
        first, second = seeded_run(torch, device), seeded_run(torch, device)
        identical = all(torch.equal(a, b) for a, b in zip(first, second))
        facts["seeded_run_identical"] = identical
        refusing, allowed = {}, []
        for op, call in sorted(common_ops(torch, device).items()):
            try:
                call()
                allowed.append(op)
            except Exception as exc:  # RuntimeError "does not have a deterministic implementation", or worse
                refusing[op] = first_line(exc)[:160]
        facts["refuse_under_determinism"] = refusing
        facts["allowed_under_determinism"] = allowed
    except RuntimeError as exc:
        raise Fail("seeded training refused under determinism on %s: %s" % (device, first_line(exc)),
                   observed=first_line(exc), expected="deterministic kernels for conv/batchnorm/linear",
                   repro=REPRO)
    finally:
        disable()
    if not identical:
        diffs = [float((a - b).abs().max()) for a, b in zip(first, second)]
        raise Fail("seeded training is not bitwise identical under determinism on %s" % device, observed=diffs,
                   expected="all zeros", repro=REPRO)
    return facts
