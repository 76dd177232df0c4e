"""The HTML report in a real browser: headless Chromium opens the file, runs its script, and we
read the verdicts back out of the live DOM and take a screenshot.

Needs a Chromium (tests/install-browser.sh, which .ci/run calls). Without one the tests skip with
a loud reason on a laptop and FAIL under CI=true: a browser check that cannot run must not pass.
"""

from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from torch_matrix.cli import main as cli
from tests.browser import dump_dom, find_browser, heatmap_layout, png_size, screenshot

REAL_RUN = Path(__file__).parent / "golden" / "pins" / "real_yolo_run" / "cells"
# A real run with counterfactual cells: t2.3.1/t2.4.1 on Python 3.10 each share their slot with the
# cell that adds setuptools and clears the release.
COUNTERFACTUAL_RUN = Path(__file__).parent / "golden" / "pins" / "real_setuptools_run" / "cells"


@pytest.fixture(scope="module")
def browser() -> str:
    found = find_browser()
    if found is None:
        message = (
            "no Chromium found (chromium, chromium-browser, google-chrome or $TORCH_MATRIX_BROWSER): "
            "run `bash tests/install-browser.sh`; the HTML report's browser test did not run"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


class _Cells(HTMLParser):
    """The heatmap's cell links and their data attributes, as the browser left them."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, dict[str, str]] = {}
        self.details: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value or "" for key, value in attrs}
        if tag == "a" and "data-cell" in values:
            self.cells[values["data-cell"]] = values
        if tag == "details" and values.get("id", "").startswith("cell-"):
            self.details.append(values["id"][5:])


def _cells_of(dom: str) -> _Cells:
    parser = _Cells()
    parser.feed(dom)
    return parser


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> Path:
    """The report of a real run (torch 1.11-1.13 x numpy <2 / >=2), with the run minus one cell as
    the 'previous' run, so one cell is new."""
    work = tmp_path_factory.mktemp("html")
    previous = work / "previous" / "cells"
    previous.mkdir(parents=True)
    for path in REAL_RUN.glob("*.json"):
        if path.stem != "t1.13.1-py3.10-nplt2":
            shutil.copy(path, previous / path.name)
    html = work / "report.html"
    assert (
        cli(
            [
                "report",
                str(REAL_RUN),
                "--out",
                str(work / "out"),
                "--html",
                str(html),
                "--previous",
                str(previous.parent),
            ]
        )
        == 0
    )
    return html


def test_known_cells_have_their_verdicts_in_the_live_dom(browser, real_report):
    dom = dump_dom(browser, real_report.as_uri())
    cells = _cells_of(dom)
    assert len(cells.cells) == 8
    verdicts = {cell_id: attrs["data-verdict"] for cell_id, attrs in cells.cells.items()}
    assert verdicts["t1.12.0-py3.10-nplt2"] == "incompatible"  # the lazy CUDA init regression
    assert verdicts["t1.11.0-py3.10-nplt2"] == "compatible"
    assert verdicts["t1.12.1-py3.10-nplt2"] == "compatible"
    assert (
        verdicts["t1.13.1-py3.10-npge2"] == "incompatible"
    )  # numpy 2 with torch built for numpy 1
    assert "v-incompatible" in cells.cells["t1.12.0-py3.10-nplt2"]["class"]
    assert sorted(cells.details) == sorted(verdicts)  # each cell opens to its probes
    assert cells.cells["t1.13.1-py3.10-nplt2"]["data-change"] == "new"
    assert cells.cells["t1.12.0-py3.10-nplt2"]["data-change"] == ""


def test_the_probe_filter_recolours_cells_by_that_probe(browser, real_report):
    dom = dump_dom(browser, real_report.as_uri() + "?probe=lazy_cuda_init")
    cells = _cells_of(dom).cells
    shown = {cell_id: attrs.get("data-shown") for cell_id, attrs in cells.items()}
    assert shown["t1.12.0-py3.10-nplt2"] == "fail"
    assert shown["t1.12.0-py3.10-npge2"] == "fail"
    assert shown["t1.11.0-py3.10-npge2"] == "pass"  # incompatible cell, but this probe passed there
    assert "s-pass" in cells["t1.11.0-py3.10-npge2"]["class"]


def test_a_screenshot_of_the_real_run(browser, real_report, tmp_path):
    out = tmp_path / "report.png"
    assert screenshot(browser, real_report.as_uri(), out, width=1200, height=800) == (1200, 800)
    # A blank or unstyled page compresses to a few KB; the heatmap, chips and list do not.
    assert out.stat().st_size > 20_000
    assert png_size(out) == (1200, 800)


@pytest.fixture(scope="module")
def counterfactual_report(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("cf-html")
    html = work / "report.html"
    assert (
        cli(["report", str(COUNTERFACTUAL_RUN), "--out", str(work / "out"), "--html", str(html)])
        == 0
    )
    return html


@pytest.mark.parametrize("width", [900, 1400])
def test_every_cell_of_a_row_is_visible_the_counterfactual_included(
    browser, counterfactual_report, width
):
    layout = heatmap_layout(browser, counterfactual_report, width)
    cells = {item["cell"]: item for item in layout["cells"]}
    assert len(cells) == len(list(COUNTERFACTUAL_RUN.glob("*.json"))) == 6
    assert {"t2.3.1-py3.10-cf-with-setuptools", "t2.4.1-py3.10-cf-with-setuptools"} <= set(cells)
    for name, item in cells.items():
        assert item["inside"], f"{name} spills out of its slot at {width} px: {item}"
        assert item["shown"], f"{name} is outside the {layout['viewport']} px window: {item}"
        assert item["on_top"], f"{name} is drawn over at {width} px: {item}"
        assert item["height"] >= 30 and item["width"] >= 50, (
            f"{name} is too small to read at {width} px: {item}"
        )
