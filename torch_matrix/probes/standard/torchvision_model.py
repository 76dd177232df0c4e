"""A torchvision model built without downloading weights, with a forward pass."""

import inspect

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import caught_warnings, first_line, require_torchvision

REPRO = """import torch, torchvision
m = torchvision.models.resnet18(weights=None, num_classes=10).eval()   # torchvision<0.13: pretrained=False
print(m(torch.randn(1, 3, 32, 32)).shape)                             # torch.Size([1, 10])
"""


@probe(
    "torchvision_model",
    doc="torchvision resnet18 without weights (weights=None vs pretrained=False) "
    "forwards to the right shape",
)
def torchvision_model(ctx):
    torchvision = require_torchvision(ctx)
    import torch

    builder = torchvision.models.resnet18
    parameters = inspect.signature(builder).parameters
    facts = {"torchvision": torchvision.__version__}
    with caught_warnings() as warned:
        try:
            if "weights" in parameters:
                model = builder(weights=None, num_classes=10)
                facts["no_weights_argument"] = "weights=None"
            else:
                model = builder(pretrained=False, num_classes=10)
                facts["no_weights_argument"] = "pretrained=False"
        except Exception as exc:
            raise Fail(
                "building resnet18 without weights failed: %s" % first_line(exc),
                observed=first_line(exc),
                expected="a model",
                repro=REPRO,
            )
    if warned:
        facts["build_warnings"] = warned[:2]
    if "weights" in parameters:  # does the old spelling still work (it warns, then was removed)?
        with caught_warnings() as legacy_warned:
            try:
                builder(pretrained=False, num_classes=10)
                facts["pretrained_false"] = "accepted"
            except TypeError as exc:
                facts["pretrained_false"] = "removed: " + first_line(exc)
        if legacy_warned:
            facts["pretrained_false_warning"] = legacy_warned[0]
    torch.manual_seed(0)
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 32, 32))
    if tuple(out.shape) != (2, 10) or not bool(torch.isfinite(out).all()):
        raise Fail(
            "resnet18 forward gave a wrong or non-finite output",
            observed=tuple(out.shape),
            expected=(2, 10),
            repro=REPRO,
        )
    return facts
