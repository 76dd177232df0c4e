"""torch.compile on a small function with the default backend (inductor: needs a C++ compiler on CPU)."""

import sys

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import first_line, raise_if_python_refused

REPRO = """import torch
def f(x):
    return torch.sin(x) + torch.cos(x) * 2
compiled = torch.compile(f)   # default backend: inductor (CPU needs a working C++ compiler)
x = torch.randn(16)
print(torch.allclose(compiled(x), f(x)))
"""


def small(x):
    import torch

    return torch.sin(x) + torch.cos(x) * 2


@probe(
    "torch_compile",
    doc="torch.compile (default inductor backend) on a small function matches eager; "
    "records the backend and Python support",
    timeout=300,
)
def torch_compile(ctx):
    import torch

    if not hasattr(torch, "compile"):
        raise Unsupported("torch.compile does not exist before torch 2.0")
    facts = {"python": "%d.%d" % sys.version_info[:2], "backend": "inductor"}
    dynamo = None
    try:
        import torch._dynamo as dynamo

        facts["backends"] = sorted(dynamo.list_backends())[:10]
        dynamo.reset()
    except Exception as exc:
        facts["backends"] = first_line(exc)
    x = torch.randn(16)
    try:
        out = torch.compile(small)(x)
    except Exception as exc:
        message = first_line(exc)
        raise_if_python_refused(exc, facts)
        # Distinguish a broken inductor (e.g. no C++ compiler) from a broken dynamo.
        try:
            if dynamo is not None:
                dynamo.reset()
            torch.compile(small, backend="eager")(x)
            facts["eager_backend"] = "ok"
        except Exception as inner:
            facts["eager_backend"] = first_line(inner)
        raise Fail(
            "torch.compile failed: %s" % message,
            observed=message,
            expected="a compiled function",
            repro=REPRO,
            evidence=facts,
        )
    if not torch.allclose(out, small(x), atol=1e-5):
        raise Fail(
            "compiled function differs from eager",
            observed=out.tolist(),
            expected=small(x).tolist(),
            repro=REPRO,
            evidence=facts,
        )
    return facts
