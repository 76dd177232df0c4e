"""Which run an argument-less ``torch-matrix report`` / ``pins`` means.

The run of the spec found from here (``--spec``, ``$TORCH_MATRIX_SPEC``, ``./matrix.toml``,
``[tool.torch-matrix]`` in ``./pyproject.toml``, the built-in default): ``<results root>/<name>``,
when it holds results. Else the results root's only run, else the results root itself (every
run under it merged), as before.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from torch_matrix.vocab.errors import UserError
from torch_matrix.vocab.layout import CELLS_DIR, MERGED_NAME, results_root, run_dir


def _has_results(directory: Path) -> bool:
    return (directory / CELLS_DIR).is_dir() or (directory / MERGED_NAME).is_file()


def default_run_dir(spec_path: str | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    from torch_matrix.world.specfile import load_spec

    root = results_root(environ)
    try:
        spec = load_spec(spec_path, environ)
    except UserError:
        spec = None  # a spec that does not load names no run; the root's runs still can
    if spec is not None and _has_results(run_dir(root, spec.name)):
        return run_dir(root, spec.name)
    runs = (
        sorted(d for d in root.iterdir() if d.is_dir() and _has_results(d)) if root.is_dir() else []
    )
    return runs[0] if len(runs) == 1 else root


def resolve(args, command: str, environ: Mapping[str, str] = os.environ) -> None:
    """Fill ``args.results_dir`` when the command line gave none, and say which directory it is."""
    if getattr(args, "results_dir", None):
        return
    args.results_dir = str(default_run_dir(getattr(args, "spec", None), environ))
    print(f"torch-matrix {command}: {args.results_dir}", file=sys.stderr)
