"""An ecosystem run's result files read back (issue 34): run.json and every project's side results,
from one run directory or from the shards of one run, merged. A file that cannot be read costs only
itself: it is left out with one problem line naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch_matrix.ecosystem.records import RETRIES, Role, SideRun, retry_key
from torch_matrix.vocab.errors import UserError

RUN_FILE = "run.json"
SIDE_KEYS = ("baseline", "candidate") + tuple(
    retry_key(str(role), attempt) for attempt in range(1, RETRIES + 1) for role in Role
)
HINT = "give the directory `torch-matrix ecosystem run --out DIR` wrote (it holds run.json)"


@dataclass
class Loaded:
    meta: dict[str, Any]
    sides: dict[str, dict[str, SideRun]] = field(default_factory=dict)
    bisections: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_meta(directory: Path) -> dict[str, Any]:
    """A run directory's run.json (its sides and projects); one line with a hint where it is
    missing or damaged."""
    path = directory / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            "not an ecosystem run (no run.json)", where=str(directory), hint=HINT
        ) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(f"cannot read run.json: {error}", where=str(path), hint=HINT) from None
    if not isinstance(data, dict) or "baseline" not in data or "candidate" not in data:
        raise UserError("run.json has no baseline and candidate", where=str(path), hint=HINT)
    return data


def load(directories: list[Path]) -> Loaded:
    """The merged results of one run's shards (each a directory with run.json)."""
    metas = [read_meta(d) for d in directories]
    first = metas[0]
    for directory, meta in zip(directories[1:], metas[1:]):
        for key in ("baseline", "candidate"):
            if meta.get(key, {}).get("torch") != first.get(key, {}).get("torch"):
                raise UserError(
                    f"its {key} is torch {meta.get(key, {}).get('torch')}, the first directory's "
                    f"{first.get(key, {}).get('torch')}: not shards of one run",
                    where=str(directory / RUN_FILE),
                    hint="merge the shards of one run only; compare two runs with `ecosystem diff`",
                )
    loaded = Loaded(meta={k: v for k, v in first.items() if k not in ("shard", "estimate")})
    for directory in directories:
        for project_dir in sorted((directory / "projects").glob("*")):
            if not project_dir.is_dir():
                continue
            for key in SIDE_KEYS:
                path = project_dir / f"{key}.json"
                if not path.exists():
                    continue
                try:
                    side = SideRun.from_json(json.loads(path.read_text(encoding="utf-8")))
                except (
                    OSError,
                    UnicodeDecodeError,
                    ValueError,
                    AttributeError,
                    RecursionError,
                ) as error:
                    loaded.problems.append(f"{path}: left out: {error}")
                    continue
                loaded.sides.setdefault(project_dir.name, {})[key] = side
            bisect = project_dir / "bisect.json"
            if bisect.exists():
                try:
                    loaded.bisections[project_dir.name] = json.loads(bisect.read_text("utf-8"))
                except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
                    loaded.problems.append(f"{bisect}: left out: {error}")
    return loaded


def load_report_json(path: Path) -> dict[str, Any]:
    """A run's ecosystem.json, given it or its directory."""
    target = path / "ecosystem.json" if path.is_dir() else path
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise UserError(
            f"cannot read {target.name}: {getattr(error, 'strerror', None) or error}",
            where=str(target),
            hint="run `torch-matrix ecosystem report DIR` first: it writes DIR/ecosystem.json",
        ) from None
    projects = data.get("projects") if isinstance(data, dict) else None
    if (
        not isinstance(projects, dict)
        or not all(
            isinstance(p, dict) and isinstance(p.get("class"), str) for p in projects.values()
        )
        or not all(isinstance(data.get(side, {}), dict) for side in ("baseline", "candidate"))
    ):  # what `ecosystem diff` reads: a dict of projects, each with its class
        raise UserError("not an ecosystem report", where=str(target), hint="give an ecosystem.json")
    return data
