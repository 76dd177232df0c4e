"""torchvision's compiled ops: nms and roi_align give known answers."""

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import first_line, require_torchvision

REPRO = """import torch, torchvision
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], dtype=torch.float32)
print(torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5))          # tensor([0, 2])
x = torch.arange(16.0).reshape(1, 1, 4, 4)
print(torchvision.ops.roi_align(x, [torch.tensor([[0.0, 0.0, 3.0, 3.0]])], output_size=1, aligned=True))  # 5.0
"""


@probe(
    "torchvision_ops",
    doc="torchvision.ops nms, batched_nms and roi_align run and give known answers",
)
def torchvision_ops(ctx):
    torchvision = require_torchvision(ctx)
    import torch

    ops = torchvision.ops
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], dtype=torch.float32)
    scores = torch.tensor([0.9, 0.8, 0.7])
    devices = ["cpu"] + (["cuda"] if ctx.cuda_available() else [])
    facts = {"torchvision": torchvision.__version__, "devices": devices}
    for device in devices:
        try:
            kept = ops.nms(boxes.to(device), scores.to(device), 0.5).cpu().tolist()
            batched = (
                ops.batched_nms(
                    boxes.to(device), scores.to(device), torch.tensor([0, 1, 0], device=device), 0.5
                )
                .cpu()
                .tolist()
            )
            x = torch.arange(16.0, device=device).reshape(1, 1, 4, 4)
            pooled = (
                ops.roi_align(
                    x,
                    [torch.tensor([[0.0, 0.0, 3.0, 3.0]], device=device)],
                    output_size=1,
                    aligned=True,
                )
                .flatten()
                .cpu()
                .tolist()
            )
        except (
            Exception
        ) as exc:  # "operator torchvision::nms does not exist": a mismatched torch/torchvision pair
            raise Fail(
                "torchvision ops failed on %s: %s" % (device, first_line(exc)),
                observed=first_line(exc),
                expected="nms/roi_align run",
                repro=REPRO,
            )
        observed = {
            "nms": kept,
            "batched_nms": sorted(batched),
            "roi_align": [round(v, 4) for v in pooled],
        }
        expected = {"nms": [0, 2], "batched_nms": [0, 1, 2], "roi_align": [5.0]}
        if observed != expected:
            raise Fail(
                "torchvision ops gave wrong answers on %s" % device,
                observed=observed,
                expected=expected,
                repro=REPRO,
            )
    return facts
