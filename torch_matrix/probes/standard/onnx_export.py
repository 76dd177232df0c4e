"""ONNX export of a small model, where the onnx package is installed."""

import os

from torch_matrix.probes.api import Fail, Skip, probe
from torch_matrix.probes.standard._util import first_line, scratch_dir

REPRO = """import torch, onnx
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 2)).eval()
torch.onnx.export(model, torch.randn(1, 3, 6, 6), "m.onnx", input_names=["input"], output_names=["output"])
onnx.checker.check_model(onnx.load("m.onnx"))   # torch>=2.9 exports with dynamo=True by default (needs onnxscript)
"""


def export(torch, model, x, path, **extra):
    torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"], **extra)


@probe(
    "onnx_export",
    doc="torch.onnx.export of a small conv model gives a file onnx.checker accepts "
    "(skip without onnx)",
    timeout=180,
)
def onnx_export(ctx):
    try:
        import onnx
    except ImportError:
        raise Skip("onnx not installed")
    import torch

    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2)).eval()
    x = torch.randn(1, 3, 6, 6)
    workdir = scratch_dir(ctx)
    path = os.path.join(workdir, "m.onnx")
    facts = {"onnx": onnx.__version__}
    try:
        export(torch, model, x, path)  # the call as user code writes it
        facts["exporter"] = "default"
    except Exception as exc:
        facts["default_export"] = first_line(exc)
        try:  # the TorchScript-based exporter, still there where dynamo became the default
            export(torch, model, x, path, dynamo=False)
            facts["exporter"] = "dynamo=False (default exporter failed)"
            if "onnxscript" in facts["default_export"]:
                facts["requires"] = (
                    "onnxscript installed for the default (dynamo) exporter, or dynamo=False"
                )
        except Exception:
            raise Fail(
                "torch.onnx.export failed: %s" % facts["default_export"],
                observed=facts["default_export"],
                expected="an .onnx file",
                repro=REPRO,
                evidence=facts,
            )
    try:
        proto = onnx.load(path)
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise Fail(
            "exported model rejected by onnx: %s" % first_line(exc),
            observed=first_line(exc),
            expected="a valid ONNX model",
            repro=REPRO,
            evidence=facts,
        )
    facts["opset"] = [op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")][:1]
    try:
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        facts["onnxruntime_max_abs_err"] = float(
            abs(torch.from_numpy(got) - model(x).detach()).max()
        )
    except ImportError:
        facts["onnxruntime"] = "not installed"
    return facts
