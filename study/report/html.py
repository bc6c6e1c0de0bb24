"""The HTML report: one self-contained ``report.html``.

Inline CSS, figures as base64 PNG data URIs, no scripts or external resources: the page opens
offline, and in MLflow's artifact view (a sandboxed iframe on a ``blob:`` URL, where files next
to it could not be reached) with its figures (checked in Chromium). Every string that comes from the user or the data (study, strategy and metric names,
notes) goes through `html.escape`. The page opens with what the study is about
(`study.report.about`); the tables come from `study.report.tables`, the sentences from
`study.report.prose`.

Text stays in a column of at most 1100 px; a table with more than `WIDE_COLUMNS` columns may
use the window's width, its headers wrap, and a table wider still scrolls sideways in its box,
with a visible scroll bar and a shadow on the edge that has more columns behind it (header
cells are translucent so that the shadow shows through them).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from study.report.about import about_rows, headline
from study.report.answer_prose import batch_range
from study.report.cross_check_prose import cross_check_sentences
from study.report.figures import CROSS_CHECK_FIGURE, FIGURE_CAPTIONS, figure_png, make_figures
from study.report.formatting import fmt, percent
from study.report.prose import NO_NOTES, answer, how_it_was_made, method_text
from study.report.schedule import schedule_lines, schedule_table
from study.report.tables import Table, report_tables

if TYPE_CHECKING:  # pragma: no cover
    from study.analysis.answers import Answer
    from study.report.record import ScalingReport

WIDE_COLUMNS = 8
"""Tables with more columns than this may be wider than the text column."""

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
 color:#1d2329;background:#fff;margin:0;line-height:1.5}
main{max-width:1100px;margin:0 auto;padding:1.5rem 2rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0} h2{font-size:1.3rem;margin-top:2.2rem;
 border-bottom:2px solid #e3e7eb;padding-bottom:.2rem} h3{font-size:1.05rem;margin-top:1.6rem}
code{background:#f1f3f5;padding:0 .25em;border-radius:3px;font-size:.92em}
.lead{font-size:1.15rem;margin:.2rem 0} .meta{color:#5b6670;margin:.2rem 0 1rem}
nav{margin:1rem 0} nav a{margin-right:1rem;color:#1864ab}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:.5rem 1.2rem;
 margin:.8rem 0;padding:.8rem 1rem;background:#f8f9fa;border:1px solid #e9ecef;border-radius:6px}
dl.facts div{min-width:0} dl.facts div.wide{grid-column:span 2} dl.facts div.full{grid-column:1/-1}
dl.facts dt{color:#5b6670;font-size:.8rem} dl.facts dd{margin:0;overflow-wrap:anywhere}
.answer{font-size:1.05rem;background:#f8f9fa;border-left:4px solid #1864ab;padding:.8rem 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #dee2e6;border-radius:6px;padding:.5rem .9rem;min-width:10rem}
.card b{display:block;font-size:1.35rem} .card span,.card small{display:block;color:#5b6670;
 font-size:.82rem}
figure{margin:1.2rem 0;display:inline-block;max-width:100%;vertical-align:top}
figure img{max-width:100%;height:auto;border:1px solid #e9ecef}
figcaption{color:#5b6670;font-size:.88rem;max-width:760px}
.scroll{overflow-x:auto;max-width:100%;margin:.5rem 0;scrollbar-color:#868e96 #e9ecef;
 background:linear-gradient(to right,#fff 30%,rgba(255,255,255,0)) left/2.5rem 100% no-repeat local,
 linear-gradient(to left,#fff 30%,rgba(255,255,255,0)) right/2.5rem 100% no-repeat local,
 radial-gradient(farthest-side at 0 50%,rgba(0,0,0,.25),rgba(0,0,0,0)) left/1rem 100% no-repeat,
 radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.25),rgba(0,0,0,0)) right/1rem 100%
 no-repeat}
.scroll.wide{margin-left:calc(50% - 50vw + 1.5rem);margin-right:calc(50% - 50vw + 1.5rem);
 max-width:none}
table{border-collapse:collapse;font-size:.88rem;margin:0} .wide table{margin:0 auto}
th,td{border:1px solid #dee2e6;padding:.25rem .5rem;text-align:right}
td{white-space:nowrap} th{background:rgba(222,226,230,.42);white-space:normal;vertical-align:bottom;
 min-width:3.5rem;max-width:7.5rem;font-weight:600;line-height:1.25}
td.text,th.text{text-align:left;white-space:normal} td.text{max-width:28rem}
ul.notes li{margin:.3rem 0} .none{color:#5b6670}
dl.how{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}
dl.how dt{font-weight:600} dl.how dd{margin:0;overflow-wrap:anywhere}
"""


def render_html(report: ScalingReport, pngs: Mapping[str, bytes] | None = None) -> str:
    """The self-contained HTML page (``pngs``: figure PNGs by name, e.g. from `figure_png`;
    drawn here when not given)."""
    if pngs is None:
        pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    study = _esc(report.study)
    about = headline(report)
    title = f"Scaling report: {study}" + (f" ({_esc(about)})" if about else "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f"<h1>Scaling report: <code>{study}</code></h1>",
        *([f'<p class="lead">{_esc(about)}</p>'] if about else []),
        f'<p class="meta">{len(report.trials)} trials &middot; {len(report.steps)} batch sizes '
        f"&middot; study {_esc(report.state)} &middot; made {_esc(report.created)}</p>",
        *_facts(report),
        '<nav><a href="#summary">Summary</a><a href="#figures">Figures</a>'
        '<a href="#cross-check">Cross-check</a><a href="#tables">Tables</a>'
        '<a href="#notes">Notes</a>'
        '<a href="#method">How it was made</a></nav>',
        *_summary(report),
        *_figures({k: v for k, v in pngs.items() if k != CROSS_CHECK_FIGURE}),
        *_cross_check(report),
        *_figures({k: v for k, v in pngs.items() if k == CROSS_CHECK_FIGURE}, heading=False),
        *_cbs(report),
        *_schedule(report),
        '<section id="tables"><h2>Tables</h2>',
        *(_table(table) for table in report_tables(report)),
        '</section><section id="notes"><h2>Notes</h2>',
    ]
    if report.notes:
        parts += ['<ul class="notes">', *(f"<li>{_esc(n)}</li>" for n in report.notes), "</ul>"]
    else:
        parts.append(f'<p class="none">{_esc(NO_NOTES)}</p>')
    parts.append('</section><section id="method"><h2>How it was made</h2><dl class="how">')
    parts += [
        f"<dt>{_esc(k)}</dt><dd><code>{_esc(v)}</code></dd>" for k, v in how_it_was_made(report)
    ]
    parts.append(f"</dl><p>{_esc(method_text(report))}</p></section></main></body></html>")
    return "\n".join(parts) + "\n"


def _facts(report: ScalingReport) -> list[str]:
    """What the study is about, as a grid of labelled facts; long values take more room."""
    items = []
    for label, value in about_rows(report):
        width = " full" if len(value) > 70 else " wide" if len(value) > 30 else ""
        cls = f' class="{width.strip()}"' if width else ""
        items.append(f"<div{cls}><dt>{_esc(label)}</dt><dd>{_esc(value)}</dd></div>")
    return [
        '<section id="study" aria-label="The study">',
        '<dl class="facts">',
        *items,
        "</dl>",
        "</section>",
    ]


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _summary(report: ScalingReport) -> list[str]:
    parts = [
        '<section id="summary"><h2>Summary</h2>',
        f'<p class="answer">{_esc(answer(report))}</p>',
    ]
    cards = _cards(report)
    if cards:
        parts.append('<div class="cards">')
        parts += [
            f'<div class="card"><span>{_esc(label)}</span><b>{_esc(value)}</b>'
            f"<small>{_esc(detail.strip(' ()'))}</small></div>"
            for label, value, detail in cards
        ]
        parts.append("</div>")
    if report.notes:
        parts.append(
            f'<p><a href="#notes">{len(report.notes)} note(s)</a> qualify these results.</p>'
        )
    parts.append("</section>")
    return parts


def _cards(report: ScalingReport) -> list[tuple[str, str, str]]:
    """The key numbers of the summary, the model's answers: (label, value, detail)."""
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
    return cards


def _span(answer: Answer) -> str:
    """``"55.8 to 1980"``: a continuous answer's interval as the tables write it."""
    return f"{fmt(answer.low)} to {fmt(answer.high)}"


def _cross_check(report: ScalingReport) -> list[str]:
    """The best trial of each batch size, read without the model: a diagnostic."""
    parts = ['<section id="cross-check"><h2>Cross-check: the best trial of each batch size</h2>']
    parts += [f"<p>{_esc(line)}</p>" for line in cross_check_sentences(report)]
    return [*parts, "</section>"]


def _schedule(report: ScalingReport) -> list[str]:
    """The batch schedule against the best fixed batch size: the verdict, then the table."""
    if not report.schedules:
        return []
    parts = ['<section id="schedule"><h2>Batch schedule</h2>']
    for comparison in report.schedules:
        parts.append('<ul class="notes">')
        parts += [f"<li>{_esc(line)}</li>" for line in schedule_lines(comparison)]
        parts.append("</ul>")
        parts += [_table(table) for table in schedule_table(comparison)]
    return [*parts, "</section>"]


def _cbs(report: ScalingReport) -> list[str]:
    """CBS(t) from branch trials: what it found, what it cost and the derived schedule."""
    if report.cbs is None or report.cbs.curve.empty:
        return []
    parts = ['<section id="cbs"><h2>Critical batch size over training</h2><ul class="notes">']
    parts += [f"<li>{_esc(line)}</li>" for line in report.cbs.lines()]
    parts.append("</ul>")
    if report.cbs.schedule is not None:
        parts.append(f"<pre>{_esc(report.cbs.schedule.snippet())}</pre>")
    parts.append("</section>")
    return parts


def _figures(pngs: Mapping[str, bytes], *, heading: bool = True) -> list[str]:
    if not heading:
        return [_figure(name, data) for name, data in pngs.items()]
    parts = ['<section id="figures"><h2>Figures</h2>']
    if not pngs:
        parts.append('<p class="none">No figures: no batch size reached the target.</p>')
    parts += [_figure(name, data) for name, data in pngs.items()]
    parts.append("</section>")
    return parts


def _figure(name: str, data: bytes) -> str:
    uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    return (
        f'<figure><img src="{uri}" alt="{_esc(name.replace("_", " "))}">'
        f"<figcaption>{_esc(FIGURE_CAPTIONS.get(name, name))}</figcaption></figure>"
    )


def _table(table: Table) -> str:
    """One table with its title and intro; a wide one in a box that may outgrow the text."""
    intro = f"<p>{_esc(table.intro)}</p>" if table.intro else ""
    title = f"<h3>{_esc(table.title)}</h3>{intro}"
    if not table.rows:
        return f'{title}<p class="none">{_esc(table.empty)}</p>'

    def cell(tag: str, i: int, value: str) -> str:
        cls = ' class="text"' if i in table.text_columns else ""
        return f"<{tag}{cls}>{_esc(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(table.headers))
    body = "\n".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    box = "scroll wide" if len(table.headers) > WIDE_COLUMNS else "scroll"
    return (
        f'{title}<div class="{box}" tabindex="0" role="region" aria-label="{_esc(table.title)}">'
        f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div>"
    )
