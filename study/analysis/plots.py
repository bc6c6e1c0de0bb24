"""Plots of a scaling study. Each function draws into the `Axes` it is given and returns it.

Example::

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    plot_steps_to_result(left, steps, fit=fit, regimes=regimes)
    plot_best_lr(right, steps, lr_fit=lr_fit)
    fig.savefig("study.png")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm

from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.regimes import Regimes
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

_REGIME_COLOURS = {"perfect": "tab:green", "diminishing": "tab:orange", "maximal": "tab:red"}


def _finite(df: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted batch sizes and values; plus the batch sizes whose value is not finite."""
    df = df.sort_values(BATCH_SIZE)
    b = df[BATCH_SIZE].to_numpy(dtype=float)
    v = df[column].to_numpy(dtype=float)
    ok = np.isfinite(v)
    return b[ok], v[ok], b[~ok]


def _shade_regimes(ax: Axes, regimes: Regimes | None) -> None:
    if regimes is None or not regimes.ok:
        return
    for name in ("perfect", "diminishing", "maximal"):
        span = getattr(regimes, name)
        if span is not None and span[1] > span[0]:
            ax.axvspan(span[0], span[1], color=_REGIME_COLOURS[name], alpha=0.12, lw=0, label=name)


def _mark_unreached(ax: Axes, batch_sizes: np.ndarray) -> None:
    """Batch sizes that never reached the target: a triangle at the top of the axes."""
    if batch_sizes.size:
        ax.plot(
            batch_sizes,
            np.full(batch_sizes.size, 0.97),
            "^",
            color="tab:red",
            mfc="none",
            transform=ax.get_xaxis_transform(),
            label="not reached",
        )


def _result_curve(
    ax: Axes,
    steps_df: pd.DataFrame,
    column: str,
    fit: NoiseScaleFit | None,
    regimes: Regimes | None,
    examples: bool,
) -> Axes:
    b, v, unreached = _finite(steps_df, column)
    _shade_regimes(ax, regimes)
    ax.plot(b, v, "o-", color="tab:blue", label="measured")
    _mark_unreached(ax, unreached)
    if b.size:
        grid = np.geomspace(b.min(), b.max(), 200)
        reference = np.full_like(grid, v[0]) if examples else v[0] * b[0] / grid
        ax.plot(grid, reference, ":", color="grey", label="perfect scaling")
        if fit is not None and fit.ok:
            curve = fit.predict_examples(grid) if examples else fit.predict_steps(grid)
            label = f"fit: B_noise={fit.b_noise:.3g}"
            ax.plot(grid, curve, "-", color="black", lw=1, label=label)
            band = fit.examples_band(grid) if examples else fit.steps_band(grid)
            if band is not None:
                ax.fill_between(grid, band[0], band[1], color="black", alpha=0.12, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("global batch size")
    ax.set_ylabel("examples to result" if examples else "steps to result")
    ax.legend(fontsize="small")
    return ax


def plot_steps_to_result(
    ax: Axes,
    steps_df: pd.DataFrame,
    fit: NoiseScaleFit | None = None,
    regimes: Regimes | None = None,
    *,
    column: str = "steps_to_result",
) -> Axes:
    """Steps to result against batch size, log-log.

    Draws the measured points, a perfect-scaling reference (slope -1 through the smallest batch
    size), the noise-scale fit with its profile-likelihood band, the regimes as shaded spans, and a
    triangle at the top for batch sizes that never reached the target.
    """
    return _result_curve(ax, steps_df, column, fit, regimes, examples=False)


def plot_examples_to_result(
    ax: Axes,
    steps_df: pd.DataFrame,
    fit: NoiseScaleFit | None = None,
    regimes: Regimes | None = None,
    *,
    column: str = "examples_to_result",
) -> Axes:
    """Examples to result against batch size, log-log; perfect scaling is a flat line here.

    The fit is ``E(B) = E_min (1 + B / B_noise)``.
    """
    return _result_curve(ax, steps_df, column, fit, regimes, examples=True)


def plot_best_lr(ax: Axes, steps_df: pd.DataFrame, lr_fit: LrPowerLawFit | None = None) -> Axes:
    """Best learning rate against batch size, log-log, with the searched range as bars.

    Best rates on the edge of their search range (``lr_on_edge``) are ringed in red; the
    power-law fit is drawn with its exponent and interval in the legend.
    """
    df = steps_df.sort_values(BATCH_SIZE)
    b = df[BATCH_SIZE].to_numpy(dtype=float)
    lr = df["best_learning_rate"].to_numpy(dtype=float)
    if {"lr_min", "lr_max"} <= set(df.columns):
        ax.vlines(b, df["lr_min"], df["lr_max"], color="lightgrey", lw=4, label="searched range")
    ok = np.isfinite(lr)
    ax.plot(b[ok], lr[ok], "o", color="tab:blue", label="best learning rate")
    if "lr_on_edge" in df.columns:
        edge = ok & df["lr_on_edge"].fillna(False).to_numpy(dtype=bool)
        if edge.any():
            ax.plot(b[edge], lr[edge], "o", ms=12, mfc="none", mec="tab:red", label="on range edge")
    if lr_fit is not None and lr_fit.ok and b[ok].size:
        grid = np.geomspace(b[ok].min(), b[ok].max(), 100)
        label = f"fit: alpha={lr_fit.alpha:.2f}"
        if lr_fit.alpha_ci is not None:
            label += f" [{lr_fit.alpha_ci[0]:.2f}, {lr_fit.alpha_ci[1]:.2f}]"
        ax.plot(grid, lr_fit.predict(grid), "-", color="black", lw=1, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("global batch size")
    ax.set_ylabel("best learning rate")
    ax.legend(fontsize="small")
    return ax


def plot_feasible_region(
    ax: Axes,
    trials_df: pd.DataFrame,
    *,
    colorbar: bool = False,
    cmap: str = "viridis",
) -> Axes:
    """Every trial on batch size x learning rate (log-log), coloured by steps to target.

    ``trials_df`` comes from `trial_steps_to_target`. Trials that reached the target are filled
    dots (the first collection of ``ax``, labelled ``"reached"``: pass it to
    ``fig.colorbar`` or set ``colorbar=True``); diverged trials are ``x``; the rest (never
    reached) are open circles.
    """
    b = trials_df[BATCH_SIZE].to_numpy(dtype=float)
    lr = trials_df[LEARNING_RATE].to_numpy(dtype=float)
    steps = trials_df["steps_to_target"].to_numpy(dtype=float)
    reached = np.isfinite(steps)
    diverged = ~reached & (trials_df[STATE].astype(str).to_numpy() == "diverged")
    other = ~reached & ~diverged
    norm = None
    if reached.any():
        low, high = steps[reached].min(), steps[reached].max()
        norm = LogNorm(vmin=max(low, 1e-12), vmax=max(high, low * 1.0001, 1e-12))
    mappable = ax.scatter(
        b[reached], lr[reached], c=steps[reached], cmap=cmap, norm=norm, s=36, label="reached"
    )
    if diverged.any():
        ax.scatter(b[diverged], lr[diverged], marker="x", color="tab:red", label="diverged")
    if other.any():
        ax.scatter(b[other], lr[other], facecolors="none", edgecolors="grey", label="not reached")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("global batch size")
    ax.set_ylabel("learning rate")
    ax.legend(fontsize="small")
    if colorbar and reached.any():
        ax.figure.colorbar(mappable, ax=ax, label="steps to target")
    return ax


def plot_time_to_result(
    ax: Axes, throughput_df: pd.DataFrame, *, column: str = "time_to_result"
) -> Axes:
    """Bars of time to result per batch size, one bar per strategy (log scale).

    ``throughput_df`` comes from `throughput_by_strategy` with a target. Strata that never
    reached the target get no bar and an ``inf`` label at the bottom.
    """
    df = throughput_df.sort_values([BATCH_SIZE, "strategy"])
    batches = sorted(df[BATCH_SIZE].unique())
    strategies = list(dict.fromkeys(df["strategy"].astype(str)))
    width = 0.8 / max(len(strategies), 1)
    x = np.arange(len(batches))
    for i, strategy in enumerate(strategies):
        rows = df[df["strategy"].astype(str) == strategy].set_index(BATCH_SIZE)[column]
        values = rows.reindex(batches).to_numpy(dtype=float)
        positions = x - 0.4 + width * (i + 0.5)
        ok = np.isfinite(values)
        ax.bar(positions[ok], values[ok], width=width, label=strategy)
        for position in positions[~ok & ~np.isnan(values)]:
            ax.annotate("inf", (position, 0.02), xycoords=("data", "axes fraction"), ha="center")
    ax.set_xticks(x, [f"{b:g}" for b in batches])
    ax.set_yscale("log")
    ax.set_xlabel("global batch size")
    ax.set_ylabel("seconds to result" if column == "time_to_result" else column)
    ax.legend(title="strategy", fontsize="small")
    return ax
