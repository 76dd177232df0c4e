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
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--mute-audio")
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
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done


def dump_dom(browser: str, url: str) -> str:
    """The DOM after the page's scripts ran (not the file's text)."""
    return _run(browser, "--virtual-time-budget=3000", "--dump-dom", url).stdout


def screenshot(browser: str, url: str, out: Path, width: int = 1280, height: int = 900) -> tuple[int, int]:
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
    from matrix.cli import main as cli

    with tempfile.TemporaryDirectory() as work:
        html = Path(work) / "report.html"
        if cli(["report", results, "--out", work, "--html", str(html)]) != 0:
            return 1
        print(screenshot(browser, html.as_uri() + fragment, out, height=height))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
