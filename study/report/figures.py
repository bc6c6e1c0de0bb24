"""The report's figures: drawn by the plot functions of `study.analysis.plots` into `Figure`
objects with an Agg canvas (no pyplot state), with the report's finishing touches (B_noise
marked, the y axis kept near the data, plain tick labels, fitted numbers in the legends written
as the text writes them), their captions and their PNG bytes.

Each figure has a function that draws it into a given `Axes` (`DRAW`: ``draw_steps_to_result``
and the others; `draw` also draws the loaded extensions' figures,
`study.extension.ReportFigure`), which the report and the Python API (``Study.plot``) share.

Example::

    pngs = {name: figure_png(fig) for name, fig in make_figures(report).items()}
    draw_steps_to_result(ax, report)           # into a notebook's own Axes
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from study.analysis.model_views import model_lr
from study.analysis.table import BATCH_SIZE
from study.report.formatting import ci_text, fmt
from study.report.levels import CAPTION as TARGETS_CAPTION
from study.report.levels import FIGURE as TARGETS_FIGURE
from study.report.levels import draw_target_laws

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from study.extension import ReportFigure
    from study.report.record import ScalingReport

CROSS_CHECK_FIGURE = "cross_check"
"""The cross-check's figure (the best trial of each batch size, fitted alone)."""

FIGURE_CAPTIONS = {
    TARGETS_FIGURE: TARGETS_CAPTION,
    "steps_to_result": (
        "Steps to result against global batch size (log-log). Points: the best trial of each "
        "batch size. Dotted: perfect scaling (doubling the batch halves the steps). Solid: the "
        "model of every trial, S(B) = S_min (1 + (B_noise/B)^q)^(1/q), with its pointwise band "
        "over the model's parameter draws; dashed: its B_noise. Shading: the model's perfect "
        "scaling (green), diminishing returns (orange), maximal data parallelism (red). "
        "Triangles: batch sizes that never reached the target."
    ),
    "examples_to_result": (
        "Examples to result (steps x batch size). Perfect scaling is a flat line; the model is "
        "E(B) = B S(B), which tends to E_min at small batch sizes."
    ),
    "best_lr": (
        "Best learning rate against batch size (log-log): the best trial's rate per batch size, "
        "the searched range as grey bars, best rates on the range's edge ringed in red, and the "
        "model's best rate lr*(B) with its exponent alpha."
    ),
    CROSS_CHECK_FIGURE: (
        "Cross-check: the best trial of each batch size with McCandlish et al.'s S(B) = S_min "
        "(1 + B_noise/B) fitted to those points alone (solid, profile-likelihood band), beside "
        "the model of every trial (dashed). A diagnostic, not the answer."
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

    Only figures with something to show are made (`figure_names`).
    """
    figures: dict[str, Any] = {}
    for name in figure_names(report):
        fig, ax = _figure(width=7.4 if name == "feasible_region" else 6.8)
        draw(name, ax, report)
        figures[name] = fig
    return figures


def figure_names(report: ScalingReport) -> list[str]:
    """The figures with something to show: ``steps_to_result`` and ``examples_to_result``
    need a batch size that reached the target, ``best_lr`` a best learning rate,
    ``feasible_region`` a trial with a positive learning rate, ``time_to_result`` a measured
    time."""
    steps, throughput = report.steps, report.throughput
    names = []
    if np.isfinite(steps["steps_to_result"].to_numpy(dtype=float)).any():
        names += ["steps_to_result", "examples_to_result"]
        if report.cross_check.noise_scale.ok:
            names.append(CROSS_CHECK_FIGURE)
    if np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float)).any():
        names.append("best_lr")
    if _positive_rates(report).any():
        names.append("feasible_region")
    if np.isfinite(throughput["time_to_result"].to_numpy(dtype=float)).any():
        names.append("time_to_result")
    for name, (key, figure) in extension_figures().items():  # e.g. cbs
        value = report.section(key)
        if value is not None and figure.drawable(value):
            names.append(name)
    if report.targets is not None and report.targets.sweep.answered():
        names.append(TARGETS_FIGURE)
    return names


def draw_steps_to_result(ax: Axes, report: ScalingReport) -> Axes:
    """Steps to result against batch size, the fit, its band, B_noise and the regimes."""
    return _draw_result(ax, report, "steps")


def draw_examples_to_result(ax: Axes, report: ScalingReport) -> Axes:
    """Examples to result against batch size, with E(B) = E_min (1 + B/B_noise)."""
    return _draw_result(ax, report, "examples")


def _draw_result(ax: Axes, report: ScalingReport, what: str) -> Axes:
    from study.analysis import plots

    steps, fit = report.steps, report.noise_scale
    plot = plots.plot_steps_to_result if what == "steps" else plots.plot_examples_to_result
    plot(ax, steps, fit, report.regimes)
    _relabel_fit(ax, "fit: B_noise", f"model: B_noise = {fmt(fit.b_noise)}")
    _mark_b_noise(ax, report)
    _clamp_ylim(ax, steps[f"{what}_to_result"], steps[f"fit_{what}"])
    _plain_ticks(ax)
    ax.set_title(f"{what.capitalize()} to reach {report.target}")
    return ax


def draw_best_lr(ax: Axes, report: ScalingReport) -> Axes:
    """The best learning rate per batch size, the searched ranges and the power-law fit."""
    from study.analysis import plots

    lr = model_lr(report.answers)
    plots.plot_best_lr(ax, report.steps, lr_fit=lr)
    _relabel_fit(
        ax, "fit: alpha", f"model: alpha = {fmt(lr.alpha)}{ci_text(lr.alpha_ci, lr.confidence)}"
    )
    _plain_ticks(ax)
    ax.set_title("Best learning rate per batch size")
    return ax


def draw_cross_check(ax: Axes, report: ScalingReport) -> Axes:
    """The best trial of each batch size, McCandlish et al.'s S(B) fitted to them alone, and
    the model's S(B) for comparison."""
    from study.analysis import plots

    steps, check, model = report.steps, report.cross_check, report.noise_scale
    plots.plot_steps_to_result(ax, steps, check.noise_scale, None)
    _relabel_fit(ax, "fit: B_noise", f"best trials: B_noise = {fmt(check.noise_scale.b_noise)}")
    if model.ok:
        b = steps[BATCH_SIZE].to_numpy(dtype=float)
        grid = np.geomspace(b.min(), b.max(), 200)
        ax.plot(grid, model.predict_steps(grid), "--", color="tab:purple", lw=1,
                label=f"model: B_noise = {fmt(model.b_noise)}")  # fmt: skip
        ax.legend(fontsize="small")
    _clamp_ylim(ax, steps["steps_to_result"], steps["fit_steps"])
    _plain_ticks(ax)
    ax.set_title("Cross-check: the best trial of each batch size")
    return ax


def draw_feasible_region(ax: Axes, report: ScalingReport) -> Axes:
    """Every trial on batch size x learning rate, coloured by steps to the target."""
    from study.analysis import plots

    plots.plot_feasible_region(ax, report.trials[_positive_rates(report)], colorbar=True)
    _plain_ticks(ax)
    ax.set_title(f"Trials: steps to reach {report.target}")
    return ax


def draw_time_to_result(ax: Axes, report: ScalingReport) -> Axes:
    """Time to result per strategy (linear axis when the times span less than 20x)."""
    from study.analysis import plots

    throughput = report.throughput
    plots.plot_time_to_result(ax, throughput)
    times = throughput["time_to_result"].to_numpy(dtype=float)
    times = times[np.isfinite(times) & (times > 0)]
    if times.size and times.max() / times.min() < 20:
        ax.set_yscale("linear")  # bars on a log axis exaggerate small differences
    ax.set_title("Time to result by strategy")
    return ax


#: Each figure's drawing function, by file stem (each draws into a given `Axes`).
DRAW: dict[str, Callable[[Axes, ScalingReport], Axes]] = {
    "steps_to_result": draw_steps_to_result,
    "examples_to_result": draw_examples_to_result,
    "best_lr": draw_best_lr,
    "feasible_region": draw_feasible_region,
    "time_to_result": draw_time_to_result,
    CROSS_CHECK_FIGURE: draw_cross_check,
    TARGETS_FIGURE: lambda ax, report: draw_target_laws(ax, report.targets),
}


def extension_figures() -> dict[str, tuple[str, ReportFigure]]:
    """The loaded extensions' figures by name, each with its report section's key."""
    from study.extension import report_sections

    return {f.name: (s.key, f) for s in report_sections() for f in s.figures}


def draw(name: str, ax: Axes, report: ScalingReport) -> Axes:
    """Draw figure ``name`` (`DRAW`'s, or a loaded extension's) of ``report`` into ``ax``."""
    if name in DRAW:
        return DRAW[name](ax, report)
    key, figure = extension_figures()[name]
    return figure.draw(ax, report.section(key))  # type: ignore[no-any-return]


def caption(name: str) -> str:
    """Figure ``name``'s caption (its name when it has none)."""
    if name in FIGURE_CAPTIONS:
        return FIGURE_CAPTIONS[name]
    found = extension_figures().get(name)
    return found[1].caption if found is not None else name


def _positive_rates(report: ScalingReport) -> np.ndarray:
    trials = report.trials
    lrs = trials["learning_rate"].to_numpy(dtype=float) if len(trials) else np.array([])
    return np.isfinite(lrs) & (lrs > 0)


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


def _relabel_fit(ax: Any, prefix: str, label: str) -> None:
    """Give the fitted curve whose legend label starts with ``prefix`` the label ``label``
    (the report's three significant digits), and redraw the legend."""
    lines = [line for line in ax.lines if str(line.get_label()).startswith(prefix)]
    for line in lines:
        line.set_label(label)
    if lines:
        ax.legend(fontsize="small")


def _mark_b_noise(ax: Any, report: ScalingReport) -> None:
    fit = report.noise_scale
    if not fit.ok:
        return
    low, high = ax.get_xlim()
    if low <= fit.b_noise <= high:
        ax.axvline(fit.b_noise, ls="--", lw=1, color="tab:purple", label="B_noise")
        ax.legend(fontsize="small")


def _clamp_ylim(ax: Any, *columns: pd.Series) -> None:
    """Keep the y axis near the data: a wide band must not squash the points."""
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
