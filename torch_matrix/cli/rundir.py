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
from torch_matrix.vocab import settings
from torch_matrix.vocab.layout import (
    CELLS_DIR,
    LEGACY_RESULTS,
    MERGED_NAME,
    RESULTS_ENV,
    results_root,
    run_dir,
)


def _has_results(directory: Path) -> bool:
    return (directory / CELLS_DIR).is_dir() or (directory / MERGED_NAME).is_file()


def default_run_dir(spec_path: str | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    from torch_matrix.world.specfile import load_spec

    root = results_root(environ)
    try:
        spec = load_spec(spec_path, environ)
    except UserError:
        spec = None  # a spec that does not load names no run; the root's runs still can
    roots = [root]
    if not settings.read(environ, RESULTS_ENV) and not root.is_dir():
        roots.append(Path(LEGACY_RESULTS).absolute())  # a run the old default left: still read
    for where in roots:
        if spec is not None and _has_results(run_dir(where, spec.name)):
            return run_dir(where, spec.name)
    for where in roots:
        runs = (
            sorted(d for d in where.iterdir() if d.is_dir() and _has_results(d))
            if where.is_dir()
            else []
        )
        if len(runs) == 1:
            return runs[0]
    return root


def default_root(environ: Mapping[str, str] = os.environ) -> Path:
    """The results root (``$TORCH_MATRIX_RESULTS``, else the default), or the old default
    (``./results``) where only that one exists."""
    root = results_root(environ)
    legacy = Path(LEGACY_RESULTS).absolute()
    if not settings.read(environ, RESULTS_ENV) and not root.is_dir() and legacy.is_dir():
        return legacy
    return root


def resolve(args, command: str, environ: Mapping[str, str] = os.environ) -> None:
    """Fill ``args.results_dir`` when the command line gave none, and say which directory it is."""
    if getattr(args, "results_dir", None):
        return
    args.results_dir = str(default_run_dir(getattr(args, "spec", None), environ))
    print(f"torch-matrix {command}: {args.results_dir}", file=sys.stderr)
