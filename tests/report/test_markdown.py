"""render_markdown: report.md with relative PNG references and escaped user strings."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from study.report.markdown import render_markdown
from study.report.prose import NO_NOTES

EVIL = "<script>alert(1)</script>"
PNG = b"\x89PNG\r\n\x1a\n"


def test_markdown_references_png_files_that_exist(written) -> None:
    out = written["out"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(images) == 6  # five figures and the cross-check's
    for image in images:
        assert not Path(image).is_absolute() and image.endswith(".png")
        assert (out / image).read_bytes().startswith(PNG)
    assert "## Notes" in markdown and "| batch size |" in markdown


def test_markdown_escapes_user_strings(written) -> None:
    markdown = (written["out"] / "report.md").read_text(encoding="utf-8")
    # Raw tags only inside code spans, where they are shown as text.
    assert "<script" not in re.sub(r"`[^`]*`", "", markdown)
    assert "&lt;script>alert(1)&lt;/script>" in markdown  # e.g. in the strategy tables
    assert f"# Scaling report: `{EVIL}`" in markdown


def test_a_command_with_backticks_and_pipes_stays_in_its_span(make_report, table) -> None:
    report = make_report(table.iloc[:0], command="study report `x` | tee")

    markdown = render_markdown(report)

    assert "- **command**: `` study report `x` | tee ``" in markdown
    assert "_No figures: no batch size reached the target._" in markdown
    assert "_No rows._" in markdown


def test_notes_or_none(report, make_report, make_table) -> None:
    assert NO_NOTES in render_markdown(dataclasses.replace(report, notes=()))
    assert NO_NOTES not in render_markdown(report)
    thin = make_report(make_table(batch_sizes=(32, 64)))
    assert "no answer yet: fewer than 3 batch sizes reached the target (2)" in render_markdown(thin)
