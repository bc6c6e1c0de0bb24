"""How a `Study` and a `Fit` show themselves: a compact HTML summary in Jupyter
(``_repr_html_``) and a text one in a terminal (``repr``)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

_HEAD = ("stratum", "trials", "reached", "pruned", "diverged", "best steps", "best lr")


def study_rows(summary: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Per stratum (`StudySummary.to_dict`'s): trials, statuses, best steps and learning rate."""
    rows = []
    for s in summary["strata"]:
        counts = s["statuses"]
        lr = s["best_learning_rate"]
        rows.append(
            (
                s["stratum"],
                str(s["trials"]),
                str(counts.get("reached", 0)),
                str(counts.get("pruned", 0)),
                str(counts.get("diverged", 0)),
                "-" if s["best_steps"] is None else str(s["best_steps"]),
                f"{lr:.3g}" if isinstance(lr, (int, float)) and math.isfinite(lr) else "-",
            )
        )
    return rows


def study_title(name: str, summary: Mapping[str, Any]) -> str:
    return (
        f"study {name}: {summary['trials_done']}/{summary['trials_total']} trials, "
        f"{summary['state']}"
    )


def study_text(name: str, summary: Mapping[str, Any]) -> str:
    """The title and the strata table, as ``study status`` prints them."""
    return "\n".join([study_title(name, summary), _text_table(_HEAD, study_rows(summary))])


def study_html(name: str, summary: Mapping[str, Any]) -> str:
    return f"<div><strong>{html.escape(study_title(name, summary))}</strong>" + (
        _html_table(_HEAD, study_rows(summary)) + "</div>"
    )


def fit_text(report: ScalingReport) -> str:
    """The summary lines ``study report`` prints."""
    from study.report import summary_lines

    return "\n".join(summary_lines(report))


def fit_html(report: ScalingReport) -> str:
    """The summary lines, then the answers table (quantity, estimate, interval)."""
    from study.report import summary_lines
    from study.report.answer_prose import answer_rows

    lines = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(report))
    table = ""
    if report.answers is not None:
        rows = [row[:3] for row in answer_rows(report.answers)]
        table = _html_table(("quantity", "estimate", "interval"), rows)
    return f"<div><strong>fit of {html.escape(report.study)}</strong><ul>{lines}</ul>{table}</div>"


def _text_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(head, *rows, strict=False)]
    return "\n".join(
        "  ".join(f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(r, widths)))
        for r in [head, *rows]
    )


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"
