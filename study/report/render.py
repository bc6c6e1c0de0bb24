"""Write a `ScalingReport` as HTML, Markdown, CSV and JSON, with its figures.

* **HTML**: one self-contained ``report.html`` (inline CSS, figures as base64 PNG data URIs, no
  scripts or external resources; it opens offline). Every string that comes from the user or
  the data (study, strategy and metric names, notes) goes through `html.escape`.
* **Markdown**: ``report.md`` with the figures as PNG files next to it, referenced relatively.
* **CSV**: ``trials.csv``, ``steps_to_result.csv``, ``steps_by_strategy.csv``,
  ``by_strategy.csv`` (the seed experiments' table), ``throughput.csv``, ``measurements.csv``.
* **JSON**: ``report.json`` with every fitted number; ``inf`` and NaN become ``null``.

Figures are drawn by the plot functions of `study.analysis.plots` into `Figure` objects with an
Agg canvas (no pyplot state), see `make_figures`.

Example::

    paths = write_report(report, "reports/quickstart", ["html", "json"])
    paths["report.html"]
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.table import BATCH_SIZE, to_csv
from study.report.build import ScalingReport, answer, ci_text, fmt

FORMATS = ("html", "md", "csv", "json")
"""Every output format, in the order they are written."""

CSV_FILES = (
    "trials.csv",
    "steps_to_result.csv",
    "steps_by_strategy.csv",
    "by_strategy.csv",
    "throughput.csv",
    "measurements.csv",
)


def write_report(
    report: ScalingReport, out_dir: str | Path, formats: Iterable[str] = FORMATS
) -> dict[str, Path]:
    """Write the report in ``formats`` into ``out_dir`` (created if missing).

    Returns:
        Every file written, keyed by its file name, e.g. ``{"report.html": Path(...), ...}``.

    Raises:
        ValueError: for an unknown format.
    """
    wanted = list(dict.fromkeys(formats))
    unknown = [f for f in wanted if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}; choose from {', '.join(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pngs: dict[str, bytes] = {}
    if {"html", "md"} & set(wanted):
        pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    paths: dict[str, Path] = {}
    for kind in FORMATS:
        if kind not in wanted:
            continue
        if kind == "html":
            paths["report.html"] = _write(out / "report.html", render_html(report, pngs))
        elif kind == "md":
            for name, data in pngs.items():
                path = out / f"{name}.png"
                path.write_bytes(data)
                paths[path.name] = path
            paths["report.md"] = _write(out / "report.md", render_markdown(report, list(pngs)))
        elif kind == "csv":
            paths.update(write_csv(report, out))
        else:
            paths["report.json"] = _write(out / "report.json", render_json(report))
    return paths


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ figures

FIGURE_CAPTIONS = {
    "steps_to_result": (
        "Steps to result against global batch size (log-log). Dotted: perfect scaling (doubling "
        "the batch halves the steps). Solid: the fit S(B) = S_min (1 + B_noise/B) with its "
        "bootstrap band; dashed: B_noise. Shading: perfect scaling (green), diminishing returns "
        "(orange), maximal data parallelism (red). Triangles: batch sizes that never reached "
        "the target."
    ),
    "examples_to_result": (
        "Examples to result (steps x batch size). Perfect scaling is a flat line; the fit is "
        "E(B) = E_min (1 + B/B_noise)."
    ),
    "best_lr": (
        "Best learning rate against batch size (log-log), the searched range as grey bars, best "
        "rates on the range's edge ringed in red, and the power-law fit lr* = c B^alpha."
    ),
    "feasible_region": (
        "Every trial on batch size x learning rate, coloured by steps to the target; x marks "
        "diverged trials, open circles trials that never reached the target."
    ),
    "time_to_result": (
        "Time to result per strategy: steps to result at that batch size (pooled over "
        "strategies) times the measured seconds per step."
    ),
}


def make_figures(report: ScalingReport) -> dict[str, Any]:
    """The report's figures (`matplotlib.figure.Figure`, Agg canvas), keyed by file stem.

    Only figures with something to show are made: ``steps_to_result`` and
    ``examples_to_result`` need a batch size that reached the target, ``best_lr`` a best
    learning rate, ``feasible_region`` a trial, ``time_to_result`` a measured time.
    """
    from study.analysis import plots

    steps, trials = report.steps, report.trials
    fit, regimes = report.noise_scale, report.regimes
    figures: dict[str, Any] = {}
    if np.isfinite(steps["steps_to_result"].to_numpy(dtype=float)).any():
        fig, ax = _figure()
        plots.plot_steps_to_result(ax, steps, fit, regimes)
        _mark_b_noise(ax, report)
        _clamp_ylim(ax, steps["steps_to_result"], steps["fit_steps"])
        _plain_ticks(ax)
        ax.set_title(f"Steps to reach {report.target}")
        figures["steps_to_result"] = fig
        fig, ax = _figure()
        plots.plot_examples_to_result(ax, steps, fit, regimes)
        _mark_b_noise(ax, report)
        _clamp_ylim(ax, steps["examples_to_result"], steps["fit_examples"])
        _plain_ticks(ax)
        ax.set_title(f"Examples to reach {report.target}")
        figures["examples_to_result"] = fig
    if np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float)).any():
        fig, ax = _figure()
        plots.plot_best_lr(ax, steps, lr_fit=report.lr_fit)
        _plain_ticks(ax)
        ax.set_title("Best learning rate per batch size")
        figures["best_lr"] = fig
    lrs = trials["learning_rate"].to_numpy(dtype=float) if len(trials) else np.array([])
    if (np.isfinite(lrs) & (lrs > 0)).any():
        fig, ax = _figure(width=7.4)
        plots.plot_feasible_region(ax, trials[np.isfinite(lrs) & (lrs > 0)], colorbar=True)
        _plain_ticks(ax)
        ax.set_title(f"Trials: steps to reach {report.target}")
        figures["feasible_region"] = fig
    throughput = report.throughput
    if np.isfinite(throughput["time_to_result"].to_numpy(dtype=float)).any():
        fig, ax = _figure()
        plots.plot_time_to_result(ax, throughput)
        times = throughput["time_to_result"].to_numpy(dtype=float)
        times = times[np.isfinite(times) & (times > 0)]
        if times.max() / times.min() < 20:
            ax.set_yscale("linear")  # bars on a log axis exaggerate small differences
        ax.set_title("Time to result by strategy")
        figures["time_to_result"] = fig
    return figures


def _figure(width: float = 6.8, height: float = 4.4) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _plain_ticks(ax: Any) -> None:
    """Plain numbers on log axes: batch sizes 8, 32, 128 (not 2^3, ...) and 0.01, 100, 20000
    (not 10^-2, ...); a y axis spanning little more than a decade gets ticks at 1, 2 and 5."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    if ax.get_yscale() != "log":
        return
    low, high = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if low > 0 and high / low < 30 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(NullFormatter())


def _mark_b_noise(ax: Any, report: ScalingReport) -> None:
    fit = report.noise_scale
    if not fit.ok:
        return
    low, high = ax.get_xlim()
    if low <= fit.b_noise <= high:
        ax.axvline(fit.b_noise, ls="--", lw=1, color="tab:purple", label="B_noise")
        ax.legend(fontsize="small")


def _clamp_ylim(ax: Any, *columns: pd.Series) -> None:
    """Keep the y axis near the data: a wide bootstrap band must not squash the points."""
    values = np.concatenate([c.to_numpy(dtype=float) for c in columns])
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return
    low, high = values.min() / 2.0, values.max() * 2.0
    current = ax.get_ylim()
    ax.set_ylim(max(current[0], low), min(current[1], high))


def figure_png(fig: Any) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


# --------------------------------------------------------------------------------- table specs

Column = tuple[str, str, Callable[[Mapping[str, Any]], str]]


def _col(name: str, header: str, digits: int = 3) -> Column:
    return (name, header, lambda row: fmt(row.get(name), digits))


def _range(row: Mapping[str, Any]) -> str:
    return f"{fmt(row.get('lr_min'))} to {fmt(row.get('lr_max'))}"


_STEPS_COLUMNS: list[Column] = [
    _col(BATCH_SIZE, "batch size"),
    _col("steps_to_result", "steps to result"),
    _col("fit_steps", "fitted S(B)"),
    _col("examples_to_result", "examples to result"),
    _col("regime", "regime"),
    _col("best_learning_rate", "best learning rate"),
    ("lr_range", "searched learning rates", _range),
    ("lr_edge", "best lr on edge", lambda row: str(row.get("lr_edge") or "no")),
    _col("trials", "trials"),
    _col("reached", "reached"),
    _col("diverged", "diverged"),
    _col("seconds_to_result", "fastest seconds to result"),
]
_BY_STRATEGY_COLUMNS: list[Column] = [
    _col(BATCH_SIZE, "batch size"),
    _col("strategy", "strategy"),
    _col("steps_to_result", "steps to result"),
    _col("seconds_to_result", "fastest seconds to result"),
    _col("best_learning_rate", "best learning rate"),
    _col("trials", "trials"),
    _col("reached", "reached"),
    _col("diverged", "diverged"),
]
_THROUGHPUT_COLUMNS: list[Column] = [
    _col("strategy", "strategy"),
    _col("replicas", "replicas"),
    _col(BATCH_SIZE, "batch size"),
    _col("seconds_per_step", "seconds per step"),
    _col("examples_per_second", "examples per second"),
    _col("steps_to_result", "steps to result (pooled)"),
    _col("time_to_result", "time to result (s)"),
    _col("measured_seconds_to_result", "measured seconds to result"),
    _col("timed_trials", "timed trials"),
]


def _strategy_columns(report: ScalingReport) -> list[Column]:
    fixed = [
        _col("strategy", "strategy"),
        _col("replicas", "replicas"),
        _col(BATCH_SIZE, "batch size"),
        _col("seconds_to_result", "seconds to result"),
        _col("steps_to_result", "steps to result"),
        _col("seconds_per_step", "seconds per step"),
        _col("best_trial", "trial"),
        _col("learning_rate", "learning rate"),
    ]
    taken = {c[0] for c in fixed}
    metrics = [c for c in report.strategies.columns if c not in taken]
    return fixed + [_col(m, f"final {m}", 4) for m in metrics]


def _rows(df: pd.DataFrame, columns: Sequence[Column]) -> tuple[list[str], list[list[str]]]:
    headers = [c[1] for c in columns]
    records = df.to_dict("records") if len(df) else []
    return headers, [[c[2](r) for c in columns] for r in records]


Row = tuple[str, str, str, str]


def fitted_numbers(report: ScalingReport) -> list[Row]:
    """Rows of the fitted-numbers table: (quantity, estimate, 95% interval, comment)."""
    return [
        *_noise_rows(report),
        *_regime_rows(report),
        *_lr_rows(report),
        *_recommendation_rows(report),
    ]


def _interval(interval: Sequence[float] | None) -> str:
    return "-" if interval is None else f"{fmt(interval[0])} to {fmt(interval[1])}"


def _noise_rows(report: ScalingReport) -> list[Row]:
    fit = report.noise_scale
    if not fit.ok:
        return [("noise-scale fit", "not fitted", "", fit.reason)]
    replicates = f"{fit.n_boot} bootstrap replicates over trials"
    return [
        ("B_noise (critical batch size)", fmt(fit.b_noise), _interval(fit.b_noise_ci), ""),
        ("S_min (fewest steps, large batches)", fmt(fit.s_min), _interval(fit.s_min_ci), ""),
        ("E_min (fewest examples, small batches)", fmt(fit.e_min), _interval(fit.e_min_ci), ""),
        ("fit residual (RMS of log steps)", fmt(fit.residual_rms), "", replicates),
    ]


def _regime_rows(report: ScalingReport) -> list[Row]:
    regimes = report.regimes
    if not regimes.ok:
        return [("scaling regimes", "not determined", "", regimes.reason)]
    start = regimes.max_parallel_start
    return [
        ("perfect scaling up to batch size", fmt(regimes.perfect_end), "", ""),
        (
            "maximal data parallelism from batch size",
            fmt(start),
            "",
            "" if start is not None else "not within the measured range",
        ),
    ]


def _lr_rows(report: ScalingReport) -> list[Row]:
    lr = report.lr_fit
    if not lr.ok:
        return [("learning-rate power law", "not fitted", "", lr.reason)]
    return [
        ("alpha in lr* = c B^alpha", fmt(lr.alpha), _interval(lr.alpha_ci), f"rule: {lr.rule}"),
        ("c in lr* = c B^alpha", fmt(lr.c), "", f"R^2 = {fmt(lr.r_squared)}"),
    ]


def _recommendation_rows(report: ScalingReport) -> list[Row]:
    rec = report.recommendation
    if not rec.ok:
        return [(f"recommendation ({rec.accelerators} accelerators)", "none", "", rec.reason)]
    measured_steps = (
        f"measured {fmt(rec.measured_step_speedup)}x ({fmt(rec.base_steps)} -> "
        f"{fmt(rec.steps)} steps from batch size {fmt(rec.base_batch_size)})"
    )
    time_basis = rec.time_source + (f", strategy {rec.strategy}" if rec.strategy else "")
    edge = ", on the range's edge" if rec.lr_on_edge else ""
    return [
        (
            f"recommended batch size ({rec.accelerators} accelerators)",
            fmt(rec.batch_size),
            "",
            f"{fmt(rec.per_device_batch)} per device, regime: {rec.regime}",
        ),
        ("recommended learning rate", fmt(rec.learning_rate), "", rec.lr_source + edge),
        (
            "expected speed-up in steps",
            f"{fmt(rec.step_speedup)}x",
            _interval(rec.step_speedup_ci),
            measured_steps,
        ),
        (
            "expected speed-up in wall time",
            f"{fmt(rec.time_speedup)}x",
            _interval(rec.time_speedup_ci),
            f"{time_basis}; with the measured steps {fmt(rec.measured_time_speedup)}x",
        ),
    ]


# --------------------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
 color:#1d2329;background:#fff;margin:0;line-height:1.5}
main{max-width:1100px;margin:0 auto;padding:1.5rem 2rem 4rem}
h1{font-size:1.7rem;margin:.2rem 0} h2{font-size:1.3rem;margin-top:2.2rem;
 border-bottom:2px solid #e3e7eb;padding-bottom:.2rem} h3{font-size:1.05rem;margin-top:1.6rem}
code{background:#f1f3f5;padding:0 .25em;border-radius:3px;font-size:.92em}
.meta{color:#5b6670;margin:.2rem 0 1rem} nav a{margin-right:1rem;color:#1864ab}
.answer{font-size:1.05rem;background:#f8f9fa;border-left:4px solid #1864ab;padding:.8rem 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{border:1px solid #dee2e6;border-radius:6px;padding:.5rem .9rem;min-width:10rem}
.card b{display:block;font-size:1.35rem} .card span,.card small{display:block;color:#5b6670;
 font-size:.82rem}
figure{margin:1.2rem 0;display:inline-block;max-width:100%;vertical-align:top}
figure img{max-width:100%;height:auto;border:1px solid #e9ecef}
figcaption{color:#5b6670;font-size:.88rem;max-width:760px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.88rem;margin:.5rem 0}
th,td{border:1px solid #dee2e6;padding:.25rem .55rem;text-align:right;white-space:nowrap}
th{background:#f1f3f5} td.text,th.text{text-align:left;white-space:normal}
ul.notes li{margin:.3rem 0} .none{color:#5b6670}
dl.how{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem}
dl.how dt{font-weight:600} dl.how dd{margin:0}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, text_cols=()) -> str:
    if not rows:
        return '<p class="none">No rows.</p>'

    def cell(tag: str, i: int, value: str) -> str:
        cls = ' class="text"' if i in text_cols else ""
        return f"<{tag}{cls}>{_esc(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "\n".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>\n{body}\n</tbody></table></div>"
    )


def _cards(report: ScalingReport) -> list[tuple[str, str, str]]:
    """The key numbers of the summary: (label, value, detail)."""
    fit, regimes, lr, rec = (
        report.noise_scale,
        report.regimes,
        report.lr_fit,
        report.recommendation,
    )
    cards = []
    if fit.ok:
        cards.append(("B_noise (critical batch size)", fmt(fit.b_noise), ci_text(fit.b_noise_ci)))
        cards.append(("S_min (fewest steps)", fmt(fit.s_min), ci_text(fit.s_min_ci)))
    if regimes.ok:
        cards.append(("perfect scaling up to batch size", fmt(regimes.perfect_end), ""))
        start = regimes.max_parallel_start
        cards.append(
            (
                "maximal data parallelism from batch size",
                fmt(start) if start is not None else "not reached",
                "" if start is not None else f"within {fmt(regimes.batch_sizes[-1])}",
            )
        )
    if lr.ok:
        cards.append(("alpha in best lr ~ B^alpha", fmt(lr.alpha, 2), ci_text(lr.alpha_ci, 2)))
    if rec.ok:
        cards.append(
            (
                f"batch size for {rec.accelerators} accelerators",
                fmt(rec.batch_size),
                f"learning rate {fmt(rec.learning_rate)}",
            )
        )
        cards.append(
            (
                "expected speed-up in steps",
                f"{fmt(rec.step_speedup)}x",
                ci_text(rec.step_speedup_ci),
            )
        )
    return cards


def _tables(report: ScalingReport) -> list[tuple[str, str, list[str], list[list[str]], tuple]]:
    """The report's tables: (title, introduction, headers, rows, left-aligned columns)."""
    fitted = [list(r) for r in fitted_numbers(report)]
    return [
        ("Per batch size (pooled over strategies)", "", *_rows(report.steps, _STEPS_COLUMNS), (4,)),
        (
            "Per batch size and strategy",
            "",
            *_rows(report.steps_by_strategy, _BY_STRATEGY_COLUMNS),
            (1,),
        ),
        (
            "Strategies (seed experiments)",
            "Per strategy and batch size: the trial fastest to the target in training seconds, "
            "and its validation metrics at its last evaluation.",
            *_rows(report.strategies, _strategy_columns(report)),
            (0,),
        ),
        ("Throughput", "", *_rows(report.throughput, _THROUGHPUT_COLUMNS), (0,)),
        ("Fitted numbers", "", ["quantity", "estimate", "95% interval", "comment"], fitted, (0, 3)),
    ]


NO_NOTES = "No notes: every batch size reached the target and every fit had enough data."


def render_html(report: ScalingReport, pngs: Mapping[str, bytes] | None = None) -> str:
    """The self-contained HTML page (``pngs``: figure PNGs by name, e.g. from `figure_png`)."""
    if pngs is None:
        pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    study = _esc(report.study)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Scaling report: {study}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        f"<h1>Scaling report: <code>{study}</code></h1>",
        f'<p class="meta">target <code>{_esc(report.target)}</code> &middot; '
        f"{len(report.trials)} trials &middot; {len(report.steps)} batch sizes &middot; study "
        f"{_esc(report.state)} &middot; made {_esc(report.created)}</p>",
        '<nav><a href="#summary">Summary</a><a href="#figures">Figures</a>'
        '<a href="#tables">Tables</a><a href="#notes">Notes</a>'
        '<a href="#method">How it was made</a></nav>',
        *_html_summary(report),
        *_html_figures(pngs),
        '<section id="tables"><h2>Tables</h2>',
    ]
    for title, intro, headers, rows, text_cols in _tables(report):
        parts.append(f"<h3>{_esc(title)}</h3>" + (f"<p>{_esc(intro)}</p>" if intro else ""))
        parts.append(_html_table(headers, rows, text_cols=text_cols))
    parts.append('</section><section id="notes"><h2>Notes</h2>')
    if report.notes:
        parts += ['<ul class="notes">', *(f"<li>{_esc(n)}</li>" for n in report.notes), "</ul>"]
    else:
        parts.append(f'<p class="none">{_esc(NO_NOTES)}</p>')
    parts.append('</section><section id="method"><h2>How it was made</h2><dl class="how">')
    parts += [f"<dt>{_esc(k)}</dt><dd><code>{_esc(v)}</code></dd>" for k, v in _how(report)]
    parts.append(f"</dl><p>{_esc(METHOD)}</p></section></main></body></html>")
    return "\n".join(parts) + "\n"


def _html_summary(report: ScalingReport) -> list[str]:
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


def _html_figures(pngs: Mapping[str, bytes]) -> list[str]:
    parts = ['<section id="figures"><h2>Figures</h2>']
    if not pngs:
        parts.append('<p class="none">No figures: no batch size reached the target.</p>')
    for name, data in pngs.items():
        uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append(
            f'<figure><img src="{uri}" alt="{_esc(name.replace("_", " "))}">'
            f"<figcaption>{_esc(FIGURE_CAPTIONS.get(name, name))}</figcaption></figure>"
        )
    parts.append("</section>")
    return parts


METHOD = (
    "Steps to result for a batch size is the fewest training steps at which any of its trials "
    "first met the target at an evaluation (not interpolated); a target never met counts as "
    "infinitely many steps (Shallue et al. 2018). Steps are pooled over strategies, since "
    "synchronous data parallelism does the same arithmetic as one device. The noise-scale "
    "model S(B) = S_min (1 + B_noise/B) (McCandlish et al. 2018) is fitted by least squares on "
    "log steps; its intervals come from a bootstrap that resamples the trials of every batch "
    "size. Time to result is steps to result times the measured seconds per step."
)


def _how(report: ScalingReport) -> list[tuple[str, str]]:
    rows = [
        ("command", report.command),
        ("target", str(report.target)),
        ("study", report.study),
        ("study state", report.state),
        ("trials", str(len(report.trials))),
        ("bootstrap", f"{report.n_boot} replicates, seed {report.seed}"),
        ("accelerators", str(report.accelerators)),
        ("made", report.created),
    ]
    rows += [(str(k), str(v)) for k, v in report.context.items()]
    return rows


# ----------------------------------------------------------------------------------- Markdown


def _md_text(value: Any) -> str:
    """Text safe in Markdown: no raw HTML tags, no table breaks."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def _md_code(value: Any) -> str:
    text = str(value).replace("\n", " ")
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return "_No rows._"
    lines = [
        "| " + " | ".join(_md_text(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(_md_text(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: ScalingReport, figures: Sequence[str] = ()) -> str:
    """``report.md``; ``figures`` are the PNG file stems written next to it."""
    out = [
        f"# Scaling report: {_md_code(report.study)}",
        "",
        f"Target {_md_code(report.target)} · {len(report.trials)} trials · "
        f"{len(report.steps)} batch sizes · study {_md_text(report.state)} · "
        f"made {_md_text(report.created)}",
        "",
        "## Summary",
        "",
        _md_text(answer(report)),
        "",
        "## Figures",
        "",
    ]
    if not figures:
        out += ["_No figures: no batch size reached the target._", ""]
    for name in figures:
        caption = _md_text(FIGURE_CAPTIONS.get(name, name))
        out += [f"![{name.replace('_', ' ')}]({name}.png)", "", f"_{caption}_", ""]
    out += ["## Tables", ""]
    for title, intro, headers, rows, _ in _tables(report):
        out += [f"### {title}", ""] + ([_md_text(intro), ""] if intro else [])
        out += [_md_table(headers, rows), ""]
    out += ["## Notes", ""]
    out += [f"- {_md_text(n)}" for n in report.notes] if report.notes else [NO_NOTES]
    out += ["", "## How it was made", ""]
    out += [f"- **{_md_text(k)}**: {_md_code(v)}" for k, v in _how(report)]
    out += ["", _md_text(METHOD), ""]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------- CSV


def write_csv(report: ScalingReport, out_dir: str | Path) -> dict[str, Path]:
    """Write the report's tables as CSV files (see `CSV_FILES`); ``inf`` is written as ``inf``."""
    out = Path(out_dir)
    tables = {
        "trials.csv": report.trials,
        "steps_to_result.csv": report.steps,
        "steps_by_strategy.csv": report.steps_by_strategy,
        "by_strategy.csv": report.strategies,
        "throughput.csv": report.throughput,
        "measurements.csv": report.table,
    }
    return {name: to_csv(df, out / name) for name, df in tables.items()}


# --------------------------------------------------------------------------------------- JSON


class ReportEncoder(json.JSONEncoder):
    """JSON with ``null`` for ``inf``/NaN (which are not JSON), and numpy/pandas scalars,
    tuples and DataFrames turned into plain numbers, lists and lists of records."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["allow_nan"] = False
        super().__init__(**kwargs)

    def iterencode(self, o: Any, _one_shot: bool = False) -> Any:
        return super().iterencode(plain(o), _one_shot)

    def default(self, o: Any) -> Any:  # pragma: no cover - plain() leaves nothing behind
        return str(o)


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: finite floats or None, ints, str, lists and dicts."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, pd.DataFrame):
        return [plain(r) for r in value.to_dict("records")]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray, pd.Series)):
        return [plain(v) for v in list(value)]
    if dataclasses.is_dataclass(value):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return str(value)


def _fields(obj: Any, skip: Sequence[str] = ()) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}


def report_dict(report: ScalingReport) -> dict[str, Any]:
    """Every fitted number and table of the report as plain data (inf/NaN become None)."""
    regimes = report.regimes
    return plain(
        {
            "study": report.study,
            "target": {
                "text": str(report.target),
                "metric": report.target.metric,
                "op": report.target.op,
                "threshold": report.target.threshold,
            },
            "state": report.state,
            "created": report.created,
            "command": report.command,
            "context": dict(report.context),
            "accelerators": report.accelerators,
            "bootstrap": {"n_boot": report.n_boot, "seed": report.seed},
            "summary": answer(report),
            "noise_scale": _fields(report.noise_scale, ("boot_s_min", "boot_b_noise")),
            "regimes": {
                **_fields(regimes, ("table",)),
                "perfect": regimes.perfect,
                "diminishing": regimes.diminishing,
                "maximal": regimes.maximal,
                "efficiency": regimes.table,
            },
            "lr_power_law": _fields(report.lr_fit),
            "recommendation": _fields(report.recommendation),
            "batch_sizes": report.steps,
            "by_strategy": report.steps_by_strategy,
            "strategies": report.strategies,
            "throughput": report.throughput,
            "notes": list(report.notes),
        }
    )


def render_json(report: ScalingReport) -> str:
    """``report.json``: `report_dict` encoded by `ReportEncoder`, indented."""
    return json.dumps(report_dict(report), cls=ReportEncoder, indent=2) + "\n"
