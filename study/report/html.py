"""The HTML report: one self-contained ``report.html``.

Inline CSS, figures as base64 PNG data URIs, no scripts or external resources: the page opens
offline, and in MLflow's artifact view (a sandboxed iframe on a ``blob:`` URL, where files next
to it could not be reached) with its figures (checked in Chromium). The markup is Jinja2
templates shipped with the package (``study/report/templates/``: ``report.html.j2``, its
``macros.html.j2`` and ``report.css``), rendered with autoescape on, so every string from the
user or the data (study, strategy and metric names, notes) is escaped. This module gathers what
the page shows: what the study is about (`study.report.about`), the tables
(`study.report.tables`), the sentences (`study.report.prose` and the other prose modules) and
the summary's cards.

Text stays in a column of at most 1100 px; a table with more than `WIDE_COLUMNS` columns may
use the window's width, its headers wrap, and a table wider still scrolls sideways in its box,
with a visible scroll bar and a shadow on the edge that has more columns behind it (header
cells are translucent so that the shadow shows through them).
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jinja2

from study.report.about import about_rows, headline
from study.report.answer_prose import answer_span, batch_range
from study.report.cross_check_prose import cross_check_sentences
from study.report.figures import CROSS_CHECK_FIGURE, caption, figure_png, make_figures
from study.report.formatting import fmt, percent
from study.report.levels import FIGURE as TARGETS_FIGURE
from study.report.levels import levels_lines, levels_table
from study.report.prose import NO_NOTES, answer, how_it_was_made, method_text
from study.report.sections import shown_sections
from study.report.tables import report_tables

if TYPE_CHECKING:  # pragma: no cover
    from study.analysis.answers import Answer
    from study.report.record import ScalingReport

WIDE_COLUMNS = 8
"""Tables with more columns than this may be wider than the text column."""

TEMPLATE = "report.html.j2"
"""The page's template in ``study/report/templates/``."""


@dataclass(frozen=True)
class Card:
    """One key number of the summary: ``value`` under ``label``, ``detail`` (its interval)."""

    label: str
    value: str
    detail: str


@dataclass(frozen=True)
class Figure:
    """One embedded figure: its PNG as a data URI, alt text and caption."""

    uri: str
    alt: str
    caption: str

    @classmethod
    def of(cls, name: str, data: bytes) -> Figure:
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        return cls(uri, name.replace("_", " "), caption(name))


@functools.cache
def environment() -> jinja2.Environment:
    """The templates' environment: autoescape on, undefined names an error, block tags leave
    no blank lines."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("study.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_html(report: ScalingReport, pngs: Mapping[str, bytes] | None = None) -> str:
    """The self-contained HTML page (``pngs``: figure PNGs by name, e.g. from `figure_png`;
    drawn here when not given)."""
    if pngs is None:
        pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    figures = {name: Figure.of(name, data) for name, data in pngs.items()}
    page = {
        "study": report.study,
        "about": headline(report),
        "trials": len(report.trials),
        "batch_sizes": len(report.steps),
        "state": report.state,
        "created": report.created,
        "facts": about_rows(report),
        "answer": answer(report),
        "cards": _cards(report),
        "notes": report.notes,
        "no_notes": NO_NOTES,
        "figures": [
            f for name, f in figures.items() if name not in (CROSS_CHECK_FIGURE, TARGETS_FIGURE)
        ],
        "cross_check": cross_check_sentences(report),
        "cross_check_figures": [f for name, f in figures.items() if name == CROSS_CHECK_FIGURE],
        "sections": shown_sections(report),
        "targets": None
        if report.targets is None
        else {
            "lines": levels_lines(report.targets),
            "figures": [f for name, f in figures.items() if name == TARGETS_FIGURE],
            "table": levels_table(report.targets),
        },
        "tables": report_tables(report),
        "wide_columns": WIDE_COLUMNS,
        "how": how_it_was_made(report),
        "method": method_text(report),
    }
    return environment().get_template(TEMPLATE).render(page=page)


def _cards(report: ScalingReport) -> list[Card]:
    """The key numbers of the summary, the model's answers."""
    answers, rec = report.answers, report.recommendation
    if not answers.ok:
        return []  # the summary says why, and what would let the model answer
    level = f"{percent(answers.confidence)} CI"
    cards = [
        ("B_noise", fmt(answers.b_noise.estimate), f"{level} {_span(answers.b_noise)}"),
        (
            f"critical batch size ({answers.overhead:.0%} overhead)",
            fmt(answers.critical_batch.estimate),
            f"{level} {_span(answers.critical_batch)}",
        ),
        (
            "perfect scaling up to batch size",
            fmt(answers.perfect_end.estimate),
            f"{level} {batch_range(answers.perfect_end)}",
        ),
    ]
    start = answers.max_parallel_start
    cards.append(
        (
            "maximal data parallelism from batch size",
            "not reached" if math.isinf(start.estimate) else fmt(start.estimate),
            f"{level} {batch_range(start)}",
        )
    )
    cards.append(
        ("alpha in best lr ~ B^alpha", fmt(answers.alpha.estimate), f"{level} "
         f"{_span(answers.alpha)}")
    )  # fmt: skip
    predicted = report.predicted_noise
    if predicted.ok:
        interval = predicted.interval
        cards.append(
            (
                f"B_simple (predicted, {predicted.source})",
                fmt(predicted.b_simple),
                f"{fmt(interval[0])} to {fmt(interval[1])}" if interval else "",
            )
        )
    model = report.time_model
    if model.ok and model.best is not None:
        cards.append(
            (
                "least wall time to the target",
                f"{fmt(model.best['time_to_result'])} s",
                f"batch size {fmt(model.best['batch_size'])} on {model.best['strategy']}",
            )
        )
    if rec.ok:
        cards.append(
            (
                f"batch size for {rec.accelerators} accelerators",
                fmt(rec.batch_size),
                f"{level} {batch_range(answers.recommended_batch)}; learning rate "
                f"{fmt(rec.learning_rate)}",
            )
        )
        cards.append(
            (
                "expected speed-up in steps",
                f"{fmt(rec.step_speedup)}x",
                f"{level} {_span(answers.step_speedup)}",
            )
        )
    return [Card(label, value, detail.strip(" ()")) for label, value, detail in cards]


def _span(answer: Answer) -> str:
    """``"55.8 to 1980"``: a continuous answer's interval as the tables write it."""
    return answer_span(answer)
