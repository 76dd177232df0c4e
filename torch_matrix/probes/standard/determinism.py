"""Deterministic algorithms: which API exists, bitwise-identical reruns, which ops refuse, cuBLAS workspace."""

import os

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import first_line, run_in_children

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
        return (
            "torch.use_deterministic_algorithms",
            lambda: torch.use_deterministic_algorithms(True),
            lambda: torch.use_deterministic_algorithms(False),
        )
    if hasattr(torch, "set_deterministic"):
        return (
            "torch.set_deterministic",
            lambda: torch.set_deterministic(True),
            lambda: torch.set_deterministic(False),
        )
    return None


def seeded_run(torch, device):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2)
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 4, 4).to(device), torch.randint(0, 2, (4,)).to(device)
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return [p.detach().cpu().clone() for p in model.parameters()]


def _grad_of(torch, device, fn, *shape):
    x = torch.randn(*shape, device=device, requires_grad=True)
    fn(x).sum().backward()


# The catalogue: ops that torch.use_deterministic_algorithms(True) documents as refusing
# (RuntimeError "does not have a deterministic implementation") or as nondeterministic, each
# with the devices the documentation names. Which of them refuse is recorded per version and
# device: releases add deterministic kernels (and CPU refusals: put_/MaxUnpool) over time.
CATALOGUE = (
    # name, documented devices, call(torch, device)
    (
        "max_unpool2d",
        ("cpu", "cuda"),
        lambda torch, d: torch.nn.functional.max_unpool2d(
            *torch.nn.functional.max_pool2d(
                torch.randn(1, 1, 4, 4, device=d), 2, return_indices=True
            ),
            2,
        ),
    ),
    (
        "put_",
        ("cpu", "cuda"),
        lambda torch, d: torch.zeros(4, device=d).put_(
            torch.tensor([0, 1], device=d), torch.ones(2, device=d), accumulate=False
        ),
    ),
    (
        "index_put_accumulate",
        ("cuda",),
        lambda torch, d: torch.zeros(4, device=d).index_put_(
            (torch.tensor([0, 0], device=d),), torch.ones(2, device=d), accumulate=True
        ),
    ),
    (
        "replication_pad2d_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch,
            d,
            lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"),
            1,
            1,
            4,
            4,
        ),
    ),
    (
        "reflection_pad2d_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch, d, lambda x: torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"), 1, 1, 4, 4
        ),
    ),
    (
        "interpolate_bilinear_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch,
            d,
            lambda x: torch.nn.functional.interpolate(
                x, scale_factor=2, mode="bilinear", align_corners=False
            ),
            1,
            1,
            4,
            4,
        ),
    ),
    (
        "adaptive_avg_pool2d_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch, d, lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 3), 1, 1, 5, 5
        ),
    ),
    (
        "adaptive_max_pool2d_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch, d, lambda x: torch.nn.functional.adaptive_max_pool2d(x, 3), 1, 1, 5, 5
        ),
    ),
    (
        "avg_pool3d_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch, d, lambda x: torch.nn.functional.avg_pool3d(x, 2), 1, 1, 4, 4, 4
        ),
    ),
    (
        "grid_sample_backward",
        ("cuda",),
        lambda torch, d: _grad_of(
            torch,
            d,
            lambda x: torch.nn.functional.grid_sample(
                x, torch.zeros(1, 2, 2, 2, device=d), align_corners=False
            ),
            1,
            1,
            4,
            4,
        ),
    ),
    (
        "nll_loss",
        ("cuda",),
        lambda torch, d: torch.nn.functional.nll_loss(
            torch.randn(3, 4, device=d).log_softmax(1), torch.tensor([0, 1, 2], device=d)
        ),
    ),
    (
        "embedding_bag_backward_max",
        ("cuda",),
        lambda torch, d: (
            torch.nn.functional.embedding_bag(
                torch.tensor([0, 1, 1], device=d),
                torch.randn(3, 2, device=d, requires_grad=True),
                torch.tensor([0], device=d),
                mode="max",
            )
            .sum()
            .backward()
        ),
    ),
    (
        "index_add_",
        ("cuda",),
        lambda torch, d: torch.zeros(4, device=d).index_add_(
            0, torch.tensor([0, 0, 1], device=d), torch.ones(3, device=d)
        ),
    ),
    (
        "scatter_add_",
        ("cuda",),
        lambda torch, d: torch.zeros(4, device=d).scatter_add_(
            0, torch.tensor([0, 0, 1], device=d), torch.ones(3, device=d)
        ),
    ),
    ("histc", ("cuda",), lambda torch, d: torch.histc(torch.randn(8, device=d), bins=4)),
    (
        "bincount_weighted",
        ("cuda",),
        lambda torch, d: torch.bincount(
            torch.tensor([0, 1, 1], device=d), weights=torch.ones(3, device=d)
        ),
    ),
    ("kthvalue", ("cuda",), lambda torch, d: torch.kthvalue(torch.randn(8, device=d), 2)),
    (
        "median_with_indices",
        ("cuda",),
        lambda torch, d: torch.median(torch.randn(2, 8, device=d), 1),
    ),
    ("cumsum", ("cuda",), lambda torch, d: torch.cumsum(torch.ones(4, device=d), 0)),
)


def catalogue_on(torch, device):
    """{op: "ok" | refusal} for every catalogue op, run under determinism on ``device``."""
    found = {}
    for name, _documented, call in CATALOGUE:
        try:
            call(torch, device)
            found[name] = "ok"
        except (
            Exception
        ) as exc:  # RuntimeError "does not have a deterministic implementation", or worse
            found[name] = first_line(exc)[:160]
    return found


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


@probe(
    "determinism",
    doc="deterministic-algorithms API, seeded training bitwise identical twice, ops that "
    "refuse under determinism, CUBLAS_WORKSPACE_CONFIG on CUDA",
    timeout=240,
)
def determinism(ctx):
    import torch

    api = deterministic_api(torch)
    if api is None:
        raise Unsupported(
            "neither torch.use_deterministic_algorithms nor torch.set_deterministic exists"
        )
    name, enable, disable = api
    facts = {"api": name}
    cuda = ctx.cuda_available()
    device = "cuda" if cuda else "cpu"
    facts["device"] = device
    if cuda:
        # Fresh (spawned) children: is_available() above already ran cuInit here, so forked ones could not
        # use CUDA, and each child must set the variable before its own cuBLAS starts.
        outcomes = run_in_children(
            cublas_child, [[None], [":4096:8"]], timeout=150, start_method="spawn"
        )
        summary = [
            detail if kind == "ok" else "%s: %s" % (kind, str(detail).splitlines()[0][:200])
            for kind, detail in outcomes
        ]
        facts["cublas_without_workspace_config"], facts["cublas_with_workspace_config_4096_8"] = (
            summary
        )
        # torch reads the variable at each check, so setting it now covers the seeded run below.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        facts["cublas_workspace_config_used"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    enable()
    try:
        first, second = seeded_run(torch, device), seeded_run(torch, device)
        identical = all(torch.equal(a, b) for a, b in zip(first, second))
        facts["seeded_run_identical"] = identical
        devices = ["cpu"] + (["cuda"] if cuda else [])
        catalogue = {d: catalogue_on(torch, d) for d in devices}
        facts["catalogue"] = {
            name: {
                "documented_on": list(documented),
                "refused_on": [d for d in devices if catalogue[d][name] != "ok"],
            }
            for name, documented, _call in CATALOGUE
        }
        facts["refuse_under_determinism"] = {
            name: message for name, message in sorted(catalogue[device].items()) if message != "ok"
        }
        facts["allowed_under_determinism"] = sorted(
            name for name, message in catalogue[device].items() if message == "ok"
        )
        facts["cpu_refusing"] = sorted(
            name for name, message in catalogue["cpu"].items() if message != "ok"
        )
    except RuntimeError as exc:
        raise Fail(
            "seeded training refused under determinism on %s: %s" % (device, first_line(exc)),
            observed=first_line(exc),
            expected="deterministic kernels for conv/batchnorm/linear",
            repro=REPRO,
        )
    finally:
        disable()
    if not identical:
        diffs = [float((a - b).abs().max()) for a, b in zip(first, second)]
        raise Fail(
            "seeded training is not bitwise identical under determinism on %s" % device,
            observed=diffs,
            expected="all zeros",
            repro=REPRO,
        )
    return facts
