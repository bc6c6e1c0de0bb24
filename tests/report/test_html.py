"""render_html: one self-contained page from the package's templates; user strings escaped;
intervals at their confidence."""

from __future__ import annotations

import base64
import dataclasses
import html
import re
from pathlib import Path

import pytest

import study
from study.report.html import render_html

EVIL = "<script>alert(1)</script>"
PNG = b"\x89PNG\r\n\x1a\n"


def test_html_is_self_contained(written) -> None:
    text = (written["out"] / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    for forbidden in ('src="http', "src='http", "<script", "<link", "url(", "@import"):
        assert forbidden not in text
    sources = re.findall(r'<img src="([^"]+)"', text)
    assert len(sources) == 6  # five figures and the cross-check's
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    for section in ("Summary", "Figures", "Tables", "Notes", "How it was made"):
        assert f"<h2>{section}</h2>" in text
    assert "<h2>Cross-check: the best trial of each batch size</h2>" in text
    assert "B_noise" in text and "The answers (one model of every trial)" in text


def test_html_escapes_user_strings(written) -> None:
    text = (written["out"] / "report.html").read_text(encoding="utf-8")
    assert EVIL not in text
    assert html.escape(EVIL) in text  # the study name
    assert html.escape(f"{EVIL}:2") in text  # the strategy name in the tables


def test_cards_and_header_follow_the_confidence(make_report, table) -> None:
    page = render_html(make_report(table, confidence=0.9), pngs={})

    assert "<small>90% CI " in page and "<th>90% interval</th>" in page
    assert "95%" not in page


def test_thin_data_has_no_figures_and_no_rows(make_report, table) -> None:
    page = render_html(make_report(table.iloc[:0]))

    assert '<p class="none">No figures: no batch size reached the target.</p>' in page
    assert '<p class="none">No rows.</p>' in page
    assert '<div class="cards">' not in page


def test_every_string_is_escaped_by_default(report) -> None:
    note = "<u>underlined</u> & 'quoted'"
    marked = dataclasses.replace(report, notes=(note,), context={"<i>key</i>": "<i>value</i>"})
    page = render_html(marked, pngs={})

    assert "<u>" not in page and "<i>" not in page
    assert f"<li>{html.escape(note)}</li>".replace("&#x27;", "&#39;") in page
    assert "<dt>&lt;i&gt;key&lt;/i&gt;</dt><dd><code>&lt;i&gt;value&lt;/i&gt;</code></dd>" in page
    assert '<a href="#notes">1 note(s)</a>' in page


def test_the_templates_ship_with_the_package() -> None:
    """Every file of ``study/report/templates`` matches a package-data pattern of pyproject.toml,
    so the wheel carries it (a checkout only: an installed copy has no pyproject.toml)."""
    tomllib = pytest.importorskip("tomllib")
    package = Path(study.__file__).parent
    pyproject = package.parent / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("the suite runs on an installed copy")
    patterns = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]["study"]
    templates = sorted((package / "report" / "templates").iterdir())
    assert {t.suffix for t in templates} >= {".j2", ".css"}
    for template in templates:
        relative = template.relative_to(package)
        assert any(relative.match(p) for p in patterns), f"{relative} is not package data"
