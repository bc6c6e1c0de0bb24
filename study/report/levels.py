"""The report's section on the answer across targets (``study report --targets``): its
sentences, table, figure and JSON, read from a `TargetScaling`
(`study.analysis.target_prediction`).

Example::

    scaling = target_scaling(table, target, predict=0.7)
    levels_lines(scaling)        # the law, and the prediction with what it assumed
    levels_table(scaling)        # one row per level
    draw_target_laws(ax, scaling)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from study.analysis.answers import Answer
from study.analysis.target_law import MAX_DISTANCE, SELECTION, TargetLaw
from study.analysis.target_levels import axis_value
from study.analysis.target_prediction import TargetScaling, axis_grid
from study.report.formatting import fmt, percent
from study.report.tables import Table

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

FIGURE = "targets"
"""The section's figure (file stem)."""

CAPTION = (
    "B_noise and the critical batch size against the distance still to go to each target "
    "level (log-log; harder targets to the right), each level's answer with its interval, the "
    "law fitted across levels by weighted least squares with the interval of its value, and the "
    "prediction at a target the study did not reach with that interval (open marker)."
)

TITLE = "The answer across targets"


def law_sentence(law: TargetLaw, axis: str) -> str:
    """``"B_noise ~ (1 - val_accuracy)^-2.1 (95% CI -3.1 to -1.1), a power law chosen by an F
    test ...; residual scale 1.1"``, or why there is no law."""
    if not law.ok:
        return f"No law for the {law.name}: {law.reason}."
    level = f"{percent(law.confidence)} CI"
    if law.kind == "power" and law.exponent is not None:
        e = law.exponent
        shape = (
            f"{law.name} ~ ({axis})^{fmt(e.estimate)} ({level} {fmt(e.low)} to {fmt(e.high)}): "
            "a power law"
        )
    else:
        shape = f"{law.name} constant at {fmt(math.exp(law.coefficients[0]))}: no trend"
    how = (
        f"chosen by an {SELECTION}: p = {law.p_value:.2g}"
        if law.quantity == "b_noise"
        else f"the form of B_noise's law; its own F test: p = {law.p_value:.2g}"
    )
    return f"{shape}, over {len(law.x)} levels ({how}); residual scale {law.scale:.2g}."


def levels_lines(scaling: TargetScaling) -> list[str]:
    """The section's sentences: what was refitted, each law, the prediction."""
    sweep = scaling.sweep
    answered = sweep.answered()
    lines = [
        f"The model of every trial refitted at {len(sweep.levels)} levels of "
        f"{sweep.target.metric} ({', '.join(f'{lv.threshold:g}' for lv in sweep.levels)}), "
        f"{len(answered)} of them with answers; the laws run in {sweep.axis}."
    ]
    lines += [law_sentence(law, sweep.axis) for law in scaling.laws.values()]
    prediction = scaling.prediction
    if prediction is not None:
        if prediction.ok:
            lines.append(
                f"Prediction {prediction.line()} ({percent(sweep.confidence)} intervals for the "
                f"answer at that target itself: the law's uncertainty with the levels' shared "
                f"error; a study run to it measures it with its own noise on top; trusted up "
                f"to {MAX_DISTANCE:g} fitted range beyond the levels)."
            )
        else:
            lines.append(f"No prediction: {prediction.reason}.")
    return lines


LEVEL_HEADERS = [
    "threshold", "trials reached", "B_noise", "critical batch size", "alpha",
    "batch size", "learning rate",
]  # fmt: skip


def levels_table(scaling: TargetScaling) -> Table:
    """One row per level (and the prediction's), easiest first."""
    sweep = scaling.sweep
    rows = []
    for level in sweep.levels:
        a = level.answers
        if not a.ok:
            rows.append([f"{level.threshold:g}", str(level.reached), "no answer", "", "", "", ""])
            continue
        rows.append(
            [
                f"{level.threshold:g}",
                str(level.reached),
                *(_cell(getattr(a, n)) for n in ("b_noise", "critical_batch", "alpha")),
                _cell(a.recommended_batch),
                _cell(a.recommended_lr),
            ]
        )
    prediction = scaling.prediction
    if prediction is not None and prediction.ok:
        rows.append(
            [
                f"{prediction.target.threshold:g} (predicted)",
                "",
                _cell(prediction.b_noise),
                _cell(prediction.critical_batch),
                "",
                _cell(prediction.recommended_batch),
                "",
            ]
        )
    intro = (
        f"Each level's answers with their {percent(sweep.confidence)} intervals; batch size "
        f"and learning rate for {sweep.accelerators} accelerators."
    )
    return Table(f"{TITLE} ({sweep.target.metric})", intro, LEVEL_HEADERS, rows, (0,))


def levels_dict(scaling: TargetScaling) -> dict[str, Any]:
    """The section as plain data (``report.json``'s ``targets``)."""
    sweep = scaling.sweep
    laws = {}
    for name, law in scaling.laws.items():
        laws[name] = {
            "ok": law.ok,
            "reason": law.reason,
            "kind": law.kind if law.ok else None,
            "selection": SELECTION,
            "p_value": law.p_value,
            "coefficients": list(law.coefficients),
            "exponent": None if law.exponent is None else law.exponent.to_dict(),
            "scale": law.scale,
            "dof": law.dof,
            "levels": list(law.x),
        }
    prediction = scaling.prediction
    return {
        "metric": sweep.target.metric,
        "axis": sweep.axis,
        "confidence": sweep.confidence,
        "accelerators": sweep.accelerators,
        "levels": sweep.frame().drop(columns=["reason"]).to_dict("records"),
        "laws": laws,
        "prediction": None if prediction is None else prediction.to_dict(),
        "sentences": levels_lines(scaling),
    }


def draw_target_laws(ax: Axes, scaling: TargetScaling) -> Axes:
    """Each level's B_noise and critical batch size with intervals, the laws with their bands
    and the prediction (see `CAPTION`), against the law's axis (harder to the right)."""
    sweep = scaling.sweep
    prediction = scaling.prediction
    x0 = None
    if prediction is not None and prediction.ok:
        x0 = float(axis_value(sweep.target, prediction.target.threshold))
    for (name, law), color in zip(scaling.laws.items(), ("C0", "C3")):
        points = [
            (float(axis_value(sweep.target, lv.threshold)), getattr(lv.answers, name))
            for lv in sweep.answered()
        ]
        points = [(x, a) for x, a in points if a is not None and x > 0]
        if points:
            xs = np.array([x for x, _ in points])
            mid = np.array([a.estimate for _, a in points])
            # An open end (the search range's, "at least ...") draws no arm.
            low = np.array([a.estimate if a.open_low else a.low for _, a in points])
            high = np.array([a.estimate if a.open_high else a.high for _, a in points])
            label = "B_noise" if name == "b_noise" else "critical batch size"
            yerr = [_arm(mid - low), _arm(high - mid)]
            ax.errorbar(xs, mid, yerr=yerr, fmt="o", color=color, capsize=3, label=label)
        if law.ok:
            grid = axis_grid(law, x0)
            mean, lo, hi = law.curve(grid)
            ax.plot(grid, mean, "-", color=color, lw=1)
            ax.fill_between(grid, lo, hi, color=color, alpha=0.15, lw=0)
    if x0 is not None and prediction is not None:
        for answer, color in ((prediction.b_noise, "C0"), (prediction.critical_batch, "C3")):
            if answer is not None:
                _predicted(ax, x0, answer, color)
    if ax.has_data():
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.invert_xaxis()
        _near_estimates(ax, scaling)
        ax.legend(fontsize="small")
    ax.set_xlabel(f"{sweep.axis} at the target level (harder to the right)")
    ax.set_ylabel("batch size")
    ax.set_title(f"The answer across targets of {sweep.target.metric}")
    return ax


def _near_estimates(ax: Any, scaling: TargetScaling) -> None:
    """Keep the y axis within a few times the estimates: a level whose interval is wide must
    not squash the others; plain tick labels."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    answers = [getattr(lv.answers, n) for lv in scaling.sweep.answered() for n in scaling.laws]
    if scaling.prediction is not None and scaling.prediction.ok:
        answers += [scaling.prediction.b_noise, scaling.prediction.critical_batch]
    values = np.array([a.estimate for a in answers if a is not None], dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if values.size:
        low, high = ax.get_ylim()
        ax.set_ylim(max(low, values.min() / 5.0), min(high, values.max() * 5.0))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ticks = [float(axis_value(scaling.sweep.target, lv.threshold)) for lv in scaling.sweep.levels]
    if scaling.prediction is not None and scaling.prediction.ok:
        ticks.append(float(axis_value(scaling.sweep.target, scaling.prediction.target.threshold)))
    ticks = [t for t in ticks if t > 0]
    ax.set_xticks(ticks, [f"{t:.3g}" for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _arm(length: np.ndarray) -> np.ndarray:
    """An error bar's arm: an infinite or negative one drawn as none."""
    length = np.asarray(length, dtype=float)
    return np.where(np.isfinite(length), np.maximum(length, 0.0), 0.0)


def _predicted(ax: Any, x0: float, answer: Answer, color: str) -> None:
    yerr = [_arm([answer.estimate - answer.low]), _arm([answer.high - answer.estimate])]
    ax.errorbar([x0], [answer.estimate], yerr=yerr, fmt="D", mfc="white", color=color,
                capsize=4, ms=7)  # fmt: skip


def _cell(answer: Answer | None) -> str:
    return "" if answer is None else answer.text()
