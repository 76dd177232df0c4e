"""``results/<run>/index-facts.json``: what the index said when the run started, for its pins.

The pins count coverage over the released versions the project's declared range admits, and only
releases a tested Python could install (each release's wheel Pythons). The run reads both from the
index when its cells start (the same reading ``torch-matrix pins`` does) and writes them here,
beside ``planned-cells.json``; ``report --pins`` and ``pins`` then read this file instead of
loading the spec and the index again. A file that is absent, unreadable or lacks a package the
results name is no answer: the pins read the index as before, and say so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from torch_matrix.edges.fileio import atomic_write

FACTS_NAME = "index-facts.json"
FACTS_SCHEMA = "torch-matrix-index-facts"
FACTS_VERSION = 1


@dataclass(frozen=True)
class RunIndexFacts:
    """package -> its released versions (in the declared range); package -> release -> the Python
    X.Y values its wheels serve (None: no wheel tells)."""

    released: Mapping[str, list[str]]
    wheel_pythons: Mapping[str, Mapping[str, frozenset[str] | None]] = field(default_factory=dict)
    written: str = ""  # ISO time, UTC

    def covers(self, packages: Sequence[str]) -> bool:
        return all(package in self.released for package in packages)

    def only(self, packages: Sequence[str]) -> RunIndexFacts:
        """The facts of ``packages`` alone (what the pins would have read for them)."""
        return RunIndexFacts(
            {p: list(self.released[p]) for p in packages if p in self.released},
            {p: dict(self.wheel_pythons[p]) for p in packages if p in self.wheel_pythons},
            self.written,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": FACTS_SCHEMA,
            "schema_version": FACTS_VERSION,
            "written": self.written,
            "released": {p: list(v) for p, v in sorted(self.released.items())},
            "wheel_pythons": {
                p: {v: (sorted(py) if py is not None else None) for v, py in by.items()}
                for p, by in sorted(self.wheel_pythons.items())
            },
        }


def facts_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / FACTS_NAME


def write_facts(
    run_dir: str | os.PathLike[str],
    released: Mapping[str, list[str]],
    wheel_pythons: Mapping[str, Mapping[str, frozenset[str] | None]],
) -> Path:
    written = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    facts = RunIndexFacts(released, wheel_pythons, written)
    return atomic_write(facts_path(run_dir), json.dumps(facts.to_json(), indent=1) + "\n")


def read_facts(run_dir: str | os.PathLike[str]) -> tuple[RunIndexFacts | None, str]:
    """(the run's facts, "") ; (None, why not) when there are none or they cannot be read."""
    path = facts_path(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no {FACTS_NAME} in {run_dir}"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        return None, f"{path}: not readable ({type(error).__name__})"
    released, pythons = (
        (data.get("released"), data.get("wheel_pythons"))
        if isinstance(data, dict)
        else (None, None)
    )
    if (
        not isinstance(data, dict)
        or data.get("schema") != FACTS_SCHEMA
        or data.get("schema_version") != FACTS_VERSION
        or not isinstance(released, dict)
        or not isinstance(pythons, dict)
        or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in released.values()
        )
        or not all(isinstance(by, dict) for by in pythons.values())
    ):
        return None, f"{path}: not a torch-matrix index-facts file of version {FACTS_VERSION}"
    try:
        wheel_pythons = {
            str(p): {
                str(v): (frozenset(str(x) for x in py) if py is not None else None)
                for v, py in by.items()
            }
            for p, by in pythons.items()
        }
    except TypeError:
        return None, f"{path}: not a torch-matrix index-facts file of version {FACTS_VERSION}"
    return RunIndexFacts(released, wheel_pythons, str(data.get("written") or "")), ""
