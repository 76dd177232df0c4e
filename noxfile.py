"""This repository's nox sessions: the shipped matrix sessions plus development ones.

``matrix``, ``report`` and ``pins`` come from torch_torch_matrix/noxfile.py, the noxfile that ships with
the package (what ``torch-matrix run`` uses in a downstream repository); ``tests``, ``lint``
and ``bench`` are for working on torch-matrix itself.
"""

from __future__ import annotations

import os
import sys

import nox

sys.path.insert(
    0, os.path.dirname(os.path.realpath(__file__))
)  # the checkout's torch_matrix package

from torch_matrix.noxfile import matrix, pins, report  # noqa: E402,F401 - registers the shipped sessions

nox.options.sessions = ["matrix", "followups", "report"]  # as the shipped noxfile's


@nox.session(python=False)
def tests(session: nox.Session) -> None:
    """The test suite, in the environment torch-matrix is installed in."""
    session.run(sys.executable, "-m", "pytest", *session.posargs, external=True)


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """The style checks of tests/test_style.py: ruff format --check, ruff check, mypy, at the
    versions the test extra pins (pyproject.toml), in the environment torch-matrix is installed in."""
    session.run(sys.executable, "-m", "pytest", "-q", "tests/test_style.py", external=True)


@nox.session(python=False)
def bench(session: nox.Session) -> None:
    """Benchmarks against the alternatives (benchmarks/README.md); `-- --quick` for a smoke run."""
    session.run(sys.executable, "-m", "benchmarks.run", *session.posargs, external=True)
