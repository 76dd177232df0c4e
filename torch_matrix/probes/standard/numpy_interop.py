"""Tensor <-> ndarray both ways with the numpy this cell installed."""

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import first_line, require_numpy

REPRO = """import numpy as np, torch
print(np.__version__, torch.__version__)
a = np.arange(4, dtype=np.float32); t = torch.from_numpy(a); a[0] = 7; print(t)   # shares memory
print(torch.ones(3).numpy(), torch.tensor(np.float64(1.5)), np.asarray(torch.arange(3)))
"""

# numpy dtype name -> torch dtype name, both directions must agree.
DTYPES = (
    ("float32", "float32"),
    ("float64", "float64"),
    ("float16", "float16"),
    ("int64", "int64"),
    ("int32", "int32"),
    ("uint8", "uint8"),
    ("bool", "bool"),
)


def _check_dtypes(np, torch):
    """Every dtype in ``DTYPES`` maps to its twin and back."""
    wrong = []
    for np_name, torch_name in DTYPES:
        there = torch.from_numpy(np.zeros(2, dtype=np_name)).dtype
        back = torch.zeros(2, dtype=getattr(torch, torch_name)).numpy().dtype
        if there != getattr(torch, torch_name) or back != np.dtype(np_name):
            wrong.append("%s->%s->%s" % (np_name, there, back))
    if wrong:
        raise Fail(
            "dtype mapping differs",
            observed=wrong,
            expected="identity for %s" % [d for d, _ in DTYPES],
            repro=REPRO,
        )


def _check_scalars(np, torch):
    """numpy scalars become 0-d tensors of their dtype; ``np.asarray(tensor)`` reads the values."""
    scalar = torch.tensor(np.float64(1.5))
    int_scalar = torch.tensor(np.int64(3))
    as_array = np.asarray(torch.arange(3))
    if (scalar.dtype, float(scalar), int_scalar.dtype, as_array.tolist()) != (
        torch.float64,
        1.5,
        torch.int64,
        [0, 1, 2],
    ):
        raise Fail(
            "numpy scalars / np.asarray(tensor) convert wrongly",
            observed=[str(scalar.dtype), float(scalar), str(int_scalar.dtype), as_array.tolist()],
            expected=["torch.float64", 1.5, "torch.int64", [0, 1, 2]],
            repro=REPRO,
        )


@probe(
    "numpy_interop",
    doc="from_numpy/.numpy() share memory, dtypes map both ways, numpy scalars convert "
    "(numpy 2 vs a torch built for numpy 1 breaks here)",
)
def numpy_interop(ctx):
    np = require_numpy()
    import torch

    facts = {"numpy": np.__version__}
    ctx.note("numpy", np.__version__)
    try:
        array = np.arange(4, dtype=np.float32)
        tensor = torch.from_numpy(array)
    except Exception as exc:  # "Numpy is not available": torch compiled against another numpy ABI
        hint = ""
        if int(np.__version__.split(".")[0]) >= 2:
            hint = (
                " (numpy %s with a torch compiled against NumPy 1.x: 'A module that was compiled using NumPy "
                "1.x cannot be run in NumPy 2'; pin numpy<2 for this torch)" % np.__version__
            )
        raise Fail(
            "torch.from_numpy failed: %s%s" % (first_line(exc), hint),
            observed=first_line(exc),
            expected="a tensor sharing the array's memory",
            repro=REPRO,
            evidence=facts,
        )
    array[0] = 7.0
    if float(tensor[0]) != 7.0:
        raise Fail(
            "torch.from_numpy does not share memory",
            observed=float(tensor[0]),
            expected=7.0,
            repro=REPRO,
        )
    source = torch.zeros(3)
    view = source.numpy()
    source[1] = 5.0
    if float(view[1]) != 5.0:
        raise Fail(
            "Tensor.numpy() does not share memory",
            observed=view.tolist(),
            expected=[0.0, 5.0, 0.0],
            repro=REPRO,
        )

    _check_dtypes(np, torch)
    _check_scalars(np, torch)

    # Non-contiguous and negative-stride arrays: from_numpy rejects negative strides, as_tensor copies them.
    flipped = np.arange(4)[::-1]
    try:
        torch.from_numpy(flipped)
        facts["from_numpy_negative_stride"] = "accepted"
    except ValueError:
        facts["from_numpy_negative_stride"] = "rejected (use .copy())"
    facts["as_tensor_negative_stride"] = torch.as_tensor(flipped.copy()).tolist()
    grad_tensor = torch.ones(2, requires_grad=True)
    try:
        grad_tensor.numpy()
        facts["numpy_on_requires_grad"] = "allowed"
    except RuntimeError:
        facts["numpy_on_requires_grad"] = "refused (needs .detach())"
    facts["dtypes_checked"] = [d for d, _ in DTYPES]
    return facts
