"""report.html in headless Chromium (Debian's ``chromium``), as a reader opens it: every figure
decodes, the page requests nothing beyond itself, logs no console error, names the study's
workload, and no table is cut off (wide tables get more than the text's width, and a table
wider than the window scrolls sideways in its own box, with a shadow on the edge).

Chromium (`tests.browser`) is required where the environment variable CI is set; elsewhere
these tests skip when it is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from study.report import ScalingReport, write_report
from tests.browser import Page, open_page, require_chromium

pytestmark = pytest.mark.slow

FIGURES = "Promise.all(Array.from(document.images, i => i.decode().then(() => [i.alt, i.naturalWidth, i.naturalHeight], () => [i.alt, 0, 0])))"
TABLES = """Array.from(document.querySelectorAll('.scroll'), box => ({
  title: box.getAttribute('aria-label'), wide: box.classList.contains('wide'),
  left: box.getBoundingClientRect().left, right: box.getBoundingClientRect().right,
  width: box.clientWidth, table: box.scrollWidth,
  overflow: getComputedStyle(box).overflowX, shadow: getComputedStyle(box).backgroundImage}))"""
EXPRESSIONS = {
    "figures": FIGURES,
    "text": "document.body.innerText",
    "window": "document.documentElement.clientWidth",
    "page": "document.documentElement.scrollWidth",
    "text_width": "document.querySelector('#summary').clientWidth",
    "tables": TABLES,
}  # fmt: skip


@pytest.fixture(scope="module")
def report_file(facts_report: ScalingReport, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser")
    return write_report(facts_report, out, ["html"])["report.html"]


@pytest.fixture(scope="module")
def page(report_file: Path) -> Page:
    """The report in a 1280 x 900 window."""
    require_chromium()
    return open_page(report_file, EXPRESSIONS, width=1280, height=900)


def test_every_figure_decodes(page: Page) -> None:
    figures = page.values["figures"]

    assert [alt for alt, _, _ in figures] == [
        "steps to result",
        "examples to result",
        "best lr",
        "feasible region",
        "time to result",
        "cross check",  # in the cross-check's own section
    ]
    assert all(width > 100 and height > 100 for _, width, height in figures)


def test_nothing_is_fetched_and_nothing_is_logged(page: Page, report_file: Path) -> None:
    assert page.requests[0] == report_file.resolve().as_uri()
    assert [url for url in page.requests if not url.startswith(("file:", "data:"))] == []
    assert page.errors == []
    text = report_file.read_text(encoding="utf-8")
    assert re.findall(r'(?:src|href)="(?!data:image/png;base64,|#)[^"]*"', text) == []


def test_the_page_names_the_workload_at_the_top(page: Page) -> None:
    text = page.values["text"]
    top = text[: text.index("Summary\n")]

    for fact in ("mnist1d", "mlp", "nesterov", "constant", "val_accuracy>=0.6", "2000 steps"):
        assert fact in top
    assert "48 of 48 planned: 48 reached the target" in top
    assert "study 0.1.0" in top and "search_spaces/synthetic.yaml" in top


def test_no_table_is_cut_off(page: Page) -> None:
    window, tables = page.values["window"], page.values["tables"]

    assert page.values["page"] <= window  # the page itself never scrolls sideways
    assert len(tables) == 9  # with the answers, time-to-result, noise-scale, cross-check tables
    for box in tables:
        assert box["left"] >= 0 and box["right"] <= window, box["title"]
        assert box["table"] <= box["width"] or box["overflow"] == "auto", box["title"]
    wide = [box for box in tables if box["wide"]]
    assert wide and all(box["width"] > page.values["text_width"] for box in wide)


def test_a_narrow_window_scrolls_wide_tables_with_a_cue(report_file: Path) -> None:
    require_chromium()

    narrow = open_page(report_file, {"tables": TABLES, "page": EXPRESSIONS["page"]}, width=700)

    assert narrow.values["page"] <= 700
    cut = [box for box in narrow.values["tables"] if box["table"] > box["width"]]
    assert cut, "at 700 px some table should be wider than its box"
    for box in cut:
        assert box["overflow"] == "auto" and box["right"] <= 700
        assert box["shadow"].count("radial-gradient") == 2  # the shadows on the scrolling edges
