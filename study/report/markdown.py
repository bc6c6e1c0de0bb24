"""The Markdown report: ``report.md``, with the figures as PNG files next to it.

Figures are referenced relatively (``![steps to result](steps_to_result.png)``), so the
directory can be moved or published as it is. Text from the user or the data is escaped so it
cannot open raw HTML tags or break a table; names and commands are shown as code spans.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from study.extension import Place
from study.report.about import about_rows, headline
from study.report.cross_check_prose import cross_check_sentences
from study.report.figures import CROSS_CHECK_FIGURE, caption
from study.report.levels import FIGURE as TARGETS_FIGURE
from study.report.levels import TITLE as TARGETS_TITLE
from study.report.levels import levels_lines, levels_table
from study.report.prose import NO_NOTES, answer, how_it_was_made, method_text
from study.report.sections import Shown, shown_sections
from study.report.tables import report_tables

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport


def render_markdown(report: ScalingReport, figures: Sequence[str] = ()) -> str:
    """``report.md``; ``figures`` are the PNG file stems written next to it."""
    about = headline(report)
    out = [
        f"# Scaling report: {_code(report.study)}",
        "",
        *([f"**{_text(about)}**", ""] if about else []),
        f"Target {_code(report.target)} · {len(report.trials)} trials · "
        f"{len(report.steps)} batch sizes · study {_text(report.state)} · "
        f"made {_text(report.created)}",
        "",
        "## The study",
        "",
        *(f"- **{_text(label)}**: {_text(value)}" for label, value in about_rows(report)),
        "",
        "## Summary",
        "",
        _text(answer(report)),
        "",
        "## Figures",
        "",
    ]
    if not figures:
        out += ["_No figures: no batch size reached the target._", ""]
    out += _figures([name for name in figures if name not in (CROSS_CHECK_FIGURE, TARGETS_FIGURE)])
    out += ["## Cross-check: the best trial of each batch size", ""]
    out += [line for sentence in cross_check_sentences(report) for line in (_text(sentence), "")]
    out += _figures([name for name in figures if name == CROSS_CHECK_FIGURE])
    shown = [section for section in shown_sections(report) if section.markdown]
    out += _sections([s for s in shown if s.place == Place.AFTER_CROSS_CHECK.value])
    if report.targets is not None:
        out += [f"## {TARGETS_TITLE}", ""]
        out += [f"- {_text(line)}" for line in levels_lines(report.targets)] + [""]
        out += _figures([name for name in figures if name == TARGETS_FIGURE])
        table = levels_table(report.targets)
        out += [_text(table.intro), "", _table(table.headers, table.rows, table.empty), ""]
    out += _sections([s for s in shown if s.place == Place.BEFORE_TABLES.value])
    out += ["## Tables", ""]
    extra = [t for section in shown for block in section.blocks for t in block.tables]
    for table in [*report_tables(report), *extra]:
        out += [f"### {table.title}", ""] + ([_text(table.intro), ""] if table.intro else [])
        out += [_table(table.headers, table.rows, table.empty), ""]
    out += ["## Notes", ""]
    out += [f"- {_text(n)}" for n in report.notes] if report.notes else [NO_NOTES]
    out += ["", "## How it was made", ""]
    out += [f"- **{_text(k)}**: {_code(v)}" for k, v in how_it_was_made(report)]
    out += ["", _text(method_text(report)), ""]
    return "\n".join(out)


def _sections(shown: Sequence[Shown]) -> list[str]:
    """Extension sections: a heading, each block's bullets and snippet (their tables go under
    "Tables")."""
    out = []
    for section in shown:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            out += [f"- {_text(line)}" for line in block.lines] + [""]
            if block.code:
                out += ["```", block.code.rstrip("\n"), "```", ""]
    return out


def _figures(names: Sequence[str]) -> list[str]:
    out = []
    for name in names:
        words = _text(caption(name))
        out += [f"![{name.replace('_', ' ')}]({name}.png)", "", f"_{words}_", ""]
    return out


def _text(value: Any) -> str:
    """Text safe in Markdown: no raw HTML tags, no table breaks."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def _code(value: Any) -> str:
    """A code span on one line, fenced with two backticks when the text holds one."""
    text = str(value).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str = "No rows.") -> str:
    if not rows:
        return f"_{_text(empty)}_"
    lines = [
        "| " + " | ".join(_text(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_text(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
