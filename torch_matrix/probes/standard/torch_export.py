"""torch.export on a small module, where it exists."""

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import first_line, raise_if_python_refused

REPRO = """import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(4, 2)
    def forward(self, x):
        return torch.relu(self.lin(x)) * 2
m, x = M().eval(), torch.randn(3, 4)
ep = torch.export.export(m, (x,))
print(torch.allclose(ep.module()(x), m(x)))
"""


@probe(
    "torch_export",
    doc="torch.export.export a small module and run the exported program",
    timeout=180,
)
def torch_export(ctx):
    import torch

    export_module = getattr(torch, "export", None)
    if export_module is None or not hasattr(export_module, "export"):
        try:
            import torch.export as export_module  # a submodule not imported by `import torch` in some versions
        except ImportError:
            raise Unsupported("torch.export does not exist in this version")
        if not hasattr(export_module, "export"):
            raise Unsupported("torch.export.export does not exist in this version")

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 2)

        def forward(self, x):
            return torch.relu(self.lin(x)) * 2

    torch.manual_seed(0)
    model, x = Small().eval(), torch.randn(3, 4)
    try:
        exported = export_module.export(model, (x,))
        runnable = exported.module() if hasattr(exported, "module") else exported
        out = runnable(x)
    except Exception as exc:
        raise_if_python_refused(exc)
        raise Fail(
            "torch.export failed: %s" % first_line(exc),
            observed=first_line(exc),
            expected="an ExportedProgram that runs",
            repro=REPRO,
        )
    if not torch.allclose(out, model(x), atol=1e-6):
        raise Fail(
            "the exported program computes something else",
            observed=out.tolist(),
            expected=model(x).tolist(),
            repro=REPRO,
        )
    graph_ops = sorted(
        {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    )
    return {"graph_ops": graph_ops[:10], "dynamic_shapes_dim": hasattr(export_module, "Dim")}
