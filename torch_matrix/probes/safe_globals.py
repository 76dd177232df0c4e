"""A pytest plugin for proving a ``torch.load`` fix (``-p torch_matrix.probes.safe_globals``): before
any test runs, allow the classes ``$TORCH_MATRIX_SAFE_GLOBALS`` names (dotted paths, comma
separated) with ``torch.serialization.add_safe_globals``, so a rerun of the failing tests shows
whether that allow-list is enough. Stdlib only (and torch, which the cell has); without the
variable it does nothing.
"""

import importlib
import os

GLOBALS_ENV = "TORCH_MATRIX_SAFE_GLOBALS"


def _resolve(dotted):
    module, _, name = dotted.rpartition(".")
    while module:
        try:
            found = importlib.import_module(module)
        except ImportError:
            module, _, outer = module.rpartition(".")
            name = outer + "." + name
            continue
        for part in name.split("."):
            found = getattr(found, part)
        return found
    raise ImportError("cannot import %s" % dotted)


def pytest_configure(config):
    names = [n.strip() for n in os.environ.get(GLOBALS_ENV, "").split(",") if n.strip()]
    if not names:
        return
    import torch.serialization

    torch.serialization.add_safe_globals([_resolve(name) for name in names])
