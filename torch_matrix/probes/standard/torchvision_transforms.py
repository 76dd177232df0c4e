"""torchvision transforms: the classic (v1) API, and v2 where it exists."""

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import caught_warnings, first_line, require_torchvision

REPRO = """import torch, torchvision.transforms as T
from PIL import Image
img = Image.new("RGB", (12, 10), (255, 128, 0))
x = T.Compose([T.Resize(8), T.CenterCrop(8), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])(img)
print(x.shape, x.amin(), x.amax())                        # (3, 8, 8), 0.0039.., 1.0 after ToTensor scaling /255
from torchvision.transforms import v2                      # torchvision >= 0.15
print(v2.Compose([v2.RandomResizedCrop(8, antialias=True), v2.ToDtype(torch.float32, scale=True)])(
    torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)).dtype)
"""


def check_v1(torch, T):
    facts = {}
    try:
        from PIL import Image

        image = Image.new("RGB", (12, 10), (255, 128, 0))
        to_tensor = T.Compose([T.Resize(8), T.CenterCrop(8), T.ToTensor()])(image)
        # ToTensor divides uint8 by 255: training code relies on inputs in [0, 1].
        if tuple(to_tensor.shape) != (3, 8, 8) or abs(float(to_tensor[0].mean()) - 1.0) > 1e-6:
            raise Fail(
                "v1 PIL pipeline gave the wrong tensor",
                observed=(tuple(to_tensor.shape), float(to_tensor[0].mean())),
                expected=((3, 8, 8), 1.0),
                repro=REPRO,
            )
        facts["v1_pil"] = "ok"
    except ImportError:
        facts["v1_pil"] = "PIL not installed"
    tensor = torch.rand(3, 16, 16)
    with caught_warnings() as warned:
        out = T.Compose([T.Resize(8), T.RandomHorizontalFlip(), T.Normalize([0.5] * 3, [0.5] * 3)])(
            tensor
        )
    if tuple(out.shape) != (3, 8, 8):
        raise Fail(
            "v1 tensor pipeline gave the wrong shape",
            observed=tuple(out.shape),
            expected=(3, 8, 8),
            repro=REPRO,
        )
    facts["v1_tensor"] = "ok"
    if warned:
        facts["v1_warnings"] = warned[:2]
    return facts


def check_v2(torch, v2):
    image = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8)
    steps = [v2.RandomResizedCrop(8, antialias=True), v2.RandomHorizontalFlip()]
    if hasattr(v2, "ToDtype"):
        try:
            steps.append(v2.ToDtype(torch.float32, scale=True))
        except TypeError:  # 0.15 beta: ConvertDtype instead
            steps.append(v2.ConvertDtype(torch.float32))
    else:
        steps.append(v2.ConvertDtype(torch.float32))
    out = v2.Compose(steps)(image)
    if tuple(out.shape) != (3, 8, 8) or out.dtype != torch.float32 or float(out.max()) > 1.0:
        raise Fail(
            "v2 pipeline gave the wrong tensor",
            observed=(tuple(out.shape), str(out.dtype), float(out.max())),
            expected=((3, 8, 8), "torch.float32", "<= 1.0"),
            repro=REPRO,
        )
    return "ok"


@probe(
    "torchvision_transforms",
    doc="torchvision.transforms v1 (PIL and tensor) and v2 (where it exists) give "
    "the expected shapes, dtypes and [0,1] scaling",
)
def torchvision_transforms(ctx):
    torchvision = require_torchvision(ctx)
    import torch
    import torchvision.transforms as T

    facts = {"torchvision": torchvision.__version__}
    facts.update(check_v1(torch, T))
    try:
        with caught_warnings() as warned:
            from torchvision.transforms import v2
    except ImportError:
        facts["v2"] = "unsupported (no torchvision.transforms.v2)"
        return facts
    try:
        facts["v2"] = check_v2(torch, v2)
    except Fail:
        raise
    except Exception as exc:
        raise Fail(
            "v2 transforms failed: %s" % first_line(exc),
            observed=first_line(exc),
            expected="a tensor",
            repro=REPRO,
        )
    if warned:
        facts["v2_import_warnings"] = warned[:1]
    return facts
