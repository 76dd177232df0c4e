"""Figure 10: the install check's hashing, with and without the memo of files already hashed.

The check (``python -I torch_matrix/probes/facts.py record`` in the cell) hashes every file each wheel's
RECORD lists, so a torn shared library that kept its size is caught: about 5 GiB for a CUDA
torch stack. uv hardlinks every cell's files from its cache, so the next cell of the same
release is the same inodes; the memo (``torch_matrix.probes.installcheck.VerifiedFiles``, keyed by inode, size,
mtime and the expected digest) skips what was hashed and matched before. Measured side by side
in one run on the same venv, runs alternating: the memo off (``TORCH_MATRIX_VERIFIED_DB=""``)
against a warm memo (filled by one run first, not counted), and the same memo grown to its row
limit (``VerifiedFiles.LIMIT`` rows, as on a machine that tested many releases: the rows of other
files added): each file is looked up by its key, so a full memo must cost about what a small one does.
"""

from __future__ import annotations

import time
from typing import Any

from .common import REPO_ROOT, Context, run_command
from .probe_figure import torch_venv
from .stats import ratio, summarize, targets_for

FIGURE = "10_verify_memo"
GOALS = {
    "warm memo / no memo": ("<=", 0.25, "x"),
    "memo at its row limit / small warm memo": ("<=", 1.5, "x"),
}


def _record(python: str, memo: str) -> float:
    started = time.perf_counter()
    done = run_command(
        [python, "-I", str(REPO_ROOT / "probes" / "facts.py"), "record"],
        env={"TORCH_MATRIX_VERIFIED_DB": memo},
    )
    elapsed = time.perf_counter() - started
    if done.stdout.strip() != "[]":
        raise RuntimeError(
            f"the install check found problems in the benchmark venv: {done.stdout[:500]}"
        )
    return elapsed


def grown_to_limit(memo: str, full: str) -> int:
    """A copy of ``memo`` with the rows of other files (device 0: no real file) added up to the limit."""
    import shutil
    import sqlite3

    from torch_matrix.probes.installcheck import VerifiedFiles

    shutil.copyfile(memo, full)
    connection = sqlite3.connect(full)
    with connection:
        have = connection.execute("SELECT count(*) FROM verified").fetchone()[0]
        connection.executemany(
            "INSERT INTO verified VALUES (0, ?, 4096, 0, 'sha256=x')",
            ((ino,) for ino in range(VerifiedFiles.LIMIT - have)),
        )
        rows = connection.execute("SELECT count(*) FROM verified").fetchone()[0]
    connection.close()
    return rows


def measure(ctx: Context) -> dict[str, Any]:
    python = torch_venv(ctx)
    memo = str(ctx.dir("verify_memo") / "verified.sqlite3")
    full = str(ctx.dir("verify_memo") / "verified-full.sqlite3")
    repeats = 2 if ctx.quick else 3
    _record(python, memo)  # fills the memo (one full hash, not counted)
    rows = grown_to_limit(memo, full)
    off: list[float] = []
    on: list[float] = []
    at_limit: list[float] = []
    for i in range(repeats):
        off.append(_record(python, ""))
        on.append(_record(python, memo))
        at_limit.append(_record(python, full))
        ctx.log(
            f"  run {i + 1}/{repeats}: no memo {off[-1]:.2f} s, warm memo {on[-1]:.2f} s, "
            f"memo at its limit ({rows} rows) {at_limit[-1]:.2f} s"
        )
    off_s, on_s, full_s = summarize(off), summarize(on), summarize(at_limit)
    value = ratio(on_s["median"], off_s["median"])
    grown = ratio(full_s["median"], on_s["median"])
    how = f"python -I torch_matrix/probes/facts.py record, median of {repeats}"
    return {
        "python": python,
        "no_memo_s": off_s,
        "warm_memo_s": on_s,
        "warm_memo_over_no_memo": value,
        "memo_at_limit_rows": rows,
        "memo_at_limit_s": full_s,
        "memo_at_limit_over_warm_memo": grown,
        "repeats": repeats,
        "targets": targets_for(
            FIGURE,
            GOALS,
            {"warm memo / no memo": value, "memo at its row limit / small warm memo": grown},
            {"warm memo / no memo": how, "memo at its row limit / small warm memo": how},
        ),
    }
