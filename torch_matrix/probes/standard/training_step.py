"""A few optimizer steps on a small conv + norm + linear model, as training code does them."""

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import caught_warnings

REPRO = """import torch, torch.nn as nn
torch.manual_seed(0)
wn = getattr(getattr(nn.utils, "parametrizations", None), "weight_norm", None) or nn.utils.weight_norm
model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"), nn.BatchNorm2d(4), nn.ReLU(),
                      nn.Flatten(), wn(nn.Linear(4 * 8 * 8, 16)), nn.LayerNorm(16), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
for _ in range(5):
    opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step(); print(loss.item())
"""


def weight_norm_layer(nn, layer):
    """Apply weight norm with the API this version prefers; say which one and what it warned."""
    parametrizations = getattr(nn.utils, "parametrizations", None)
    if parametrizations is not None and hasattr(parametrizations, "weight_norm"):
        return parametrizations.weight_norm(layer), "torch.nn.utils.parametrizations.weight_norm"
    return nn.utils.weight_norm(layer), "torch.nn.utils.weight_norm"


def build_model(torch):
    nn = torch.nn
    linear, api = weight_norm_layer(nn, nn.Linear(4 * 8 * 8, 16))
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, padding_mode="replicate"),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        linear,
        nn.LayerNorm(16),
        nn.Linear(16, 3),
    )
    return model, api


@probe(
    "training_step",
    doc="conv(replicate pad)+batchnorm+weight-norm linear+layernorm: forward, backward, "
    "SGD steps; loss falls, grads finite",
)
def training_step(ctx):
    import torch

    torch.manual_seed(0)
    model, weight_norm_api = build_model(torch)
    ctx.note("weight_norm_api", weight_norm_api)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 3, (8,))
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        bad = [
            name
            for name, p in model.named_parameters()
            if p.grad is None or not bool(torch.isfinite(p.grad).all())
        ]
        if bad:
            raise Fail(
                "gradients missing or not finite",
                observed=bad,
                expected="finite grads for every parameter",
                repro=REPRO,
            )
        optimizer.step()
        losses.append(float(loss.item()))
    if not losses[-1] < losses[0]:
        raise Fail(
            "loss did not go down over 5 SGD steps",
            observed=losses,
            expected="last < first",
            repro=REPRO,
        )

    # The legacy weight_norm still works where parametrizations exist (and may warn: API churn worth recording).
    with caught_warnings() as legacy_warnings:
        legacy = torch.nn.utils.weight_norm(torch.nn.Linear(4, 2))
        legacy(torch.randn(2, 4)).sum().backward()
    # optimizer.zero_grad() leaves None (set_to_none default, torch >= 2.0) or zeros: code reading .grad cares.
    optimizer.zero_grad()
    grad_after_zero = "None" if model[-1].weight.grad is None else "zeros"
    return {
        "losses": [round(v, 5) for v in losses],
        "weight_norm_api": weight_norm_api,
        "legacy_weight_norm_warnings": legacy_warnings,
        "grad_after_zero_grad": grad_after_zero,
    }
