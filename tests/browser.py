"""Headless Chromium for the HTML report's tests and the docs screenshot.

``python -m tests.browser RESULTS_DIR OUT.png [HEIGHT [CELL]]`` renders a report of RESULTS_DIR and
screenshots it, with CELL's probes open (how docs/report.png is made). The browser: $TORCH_MATRIX_BROWSER, else the first of chromium,
chromium-browser, google-chrome, google-chrome-stable on PATH (tests/install-browser.sh installs one).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)
TIMEOUT_S = 90


def find_browser() -> str | None:
    configured = os.environ.get("TORCH_MATRIX_BROWSER")
    if configured:
        return shutil.which(configured) or (configured if Path(configured).is_file() else None)
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(browser: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="torch-matrix-chromium-") as profile:
        command = [browser, *FLAGS, f"--user-data-dir={profile}", *args]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def dump_dom(browser: str, url: str, width: int = 1280, height: int = 900) -> str:
    """The DOM after the page's scripts ran (not the file's text), in a window of that size."""
    return _run(
        browser, f"--window-size={width},{height}", "--virtual-time-budget=3000", "--dump-dom", url
    ).stdout


# Appended to a copy of a report: where each heatmap cell is drawn, read back from the live layout.
# ``inside``: within its table cell (not spilling into the next row); ``shown``: in the viewport without
# scrolling sideways; ``on_top``: the point at its centre is the cell itself, not something drawn over it.
LAYOUT_SCRIPT = """<script>
(function () {
  var view = document.documentElement.clientWidth, found = [];
  document.querySelectorAll("#heatmap a.cell").forEach(function (link) {
    var box = link.getBoundingClientRect(), slot = link.closest("td").getBoundingClientRect();
    var scroller = link.closest(".scroll"), right = view;
    if (scroller) { right = Math.min(right, scroller.getBoundingClientRect().right); }
    found.push({cell: link.getAttribute("data-cell"), link: link, box: box, width: box.width, height: box.height,
                inside: box.top >= slot.top - 0.5 && box.bottom <= slot.bottom + 0.5
                        && box.left >= slot.left - 0.5 && box.right <= slot.right + 0.5,
                shown: box.left >= 0 && box.right <= right + 0.5});
  });
  found.forEach(function (item) {
    window.scrollTo(0, item.box.top + window.scrollY - window.innerHeight / 2);
    var now = item.link.getBoundingClientRect();
    var hit = document.elementFromPoint(now.left + now.width / 2, now.top + now.height / 2);
    item.on_top = !!hit && hit.closest("a.cell") === item.link;
    delete item.link; delete item.box;
  });
  document.body.setAttribute("data-layout", JSON.stringify({viewport: view, cells: found}));
})();
</script>"""


def heatmap_layout(browser: str, html: Path, width: int, height: int = 900) -> dict:
    """``{"viewport": px, "cells": [{"cell", "width", "height", "inside", "shown", "on_top"}, ...]}``
    for the report ``html`` drawn in a window ``width`` px wide."""
    import json
    from html.parser import HTMLParser

    class Body(HTMLParser):
        layout = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "body":
                self.layout = dict(attrs).get("data-layout") or ""

    with tempfile.TemporaryDirectory(prefix="torch-matrix-layout-") as work:
        probe = Path(work) / html.name
        probe.write_text(
            html.read_text(encoding="utf-8").replace("</body>", LAYOUT_SCRIPT + "\n</body>"),
            encoding="utf-8",
        )
        body = Body()
        body.feed(dump_dom(browser, probe.as_uri(), width=width, height=height))
    if not body.layout:
        raise RuntimeError(f"the layout script left nothing in {html} at {width} px")
    return json.loads(body.layout)


def screenshot(
    browser: str, url: str, out: Path, width: int = 1280, height: int = 900
) -> tuple[int, int]:
    """Write a PNG of the page; returns its (width, height) as read back from the file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(browser, f"--window-size={width},{height}", f"--screenshot={out}", url)
    return png_size(out)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


def main(argv: list[str]) -> int:
    results, out = argv[0], Path(argv[1])
    height = int(argv[2]) if len(argv) > 2 else 900
    fragment = f"?open={argv[3]}" if len(argv) > 3 else ""
    browser = find_browser()
    if browser is None:
        print("no Chromium found: run tests/install-browser.sh", file=sys.stderr)
        return 1
    from torch_matrix.cli import main as cli

    with tempfile.TemporaryDirectory() as work:
        html = Path(work) / "report.html"
        if cli(["report", results, "--out", work, "--html", str(html)]) != 0:
            return 1
        print(screenshot(browser, html.as_uri() + fragment, out, height=height))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
