"""``torch-matrix ecosystem report | diff``: an ecosystem run's reports, and two runs compared."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from torch_matrix.edges import console
from torch_matrix.edges.fileio import atomic_write


def write_reports(args: argparse.Namespace) -> int:
    from torch_matrix.ecosystem.report import build, html_page, markdown, total_wall_text, wall_text
    from torch_matrix.ecosystem.records import EcoClass
    from torch_matrix.ecosystem.results import load

    directories = [Path(d) for d in args.dirs]
    loaded = load(directories)
    for problem in loaded.problems:
        console.warn(problem)
    report = build(loaded.meta, loaded.sides, loaded.bisections)
    out = Path(args.out) if args.out else directories[0]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "ecosystem.json", json.dumps(report.to_json(), indent=1) + "\n")
    summary = markdown(report, limit=args.max_summary_chars, link=args.link)
    atomic_write(out / "summary.md", summary)
    atomic_write(out / "report.html", html_page(report))
    counts = ", ".join(f"{count} {name}" for name, count in report.counts().items() if count)
    total = sum(row.seconds() for row in report.rows)
    print(f"{len(report.rows)} project(s): {counts or 'none'}; {total:.0f} s of side time in all")
    print(f"  {total_wall_text(report)}")
    for row in report.rows:
        times = (
            "not run"
            if row.eco_class == EcoClass.SKIPPED
            else f"{row.seconds():.0f} s of side time, wall time {wall_text(row.wall_seconds())}"
        )
        print(f"  {row.name}: {row.eco_class} ({times}): {row.classified.evidence[:160]}")
    if report.missing:
        print(f"  no result: {', '.join(report.missing)}")
    console.note(
        f"wrote {out / 'report.html'}, {out / 'summary.md'} ({len(summary):,} characters), "
        f"{out / 'ecosystem.json'}"
    )
    return 0


def print_diff(args: argparse.Namespace) -> int:
    from torch_matrix.ecosystem.report import diff, diff_text
    from torch_matrix.ecosystem.results import load_report_json

    old, new = load_report_json(Path(args.old)), load_report_json(Path(args.new))
    if args.json:
        print(json.dumps(diff(old, new), indent=1))
    else:
        print(diff_text(old, new), end="")
    return 0
