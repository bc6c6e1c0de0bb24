"""A dense grid's answers read without the model, its learning-rate jaggedness smoothed out, with
the grid's own 95% intervals.

At one training seed, steps to target is a jagged function of the learning rate (about +-15% for
a 1% change). The fewest steps over a grid's 24 rates, even of their medians over three seeds, is
then the luckiest of many draws, not the steps a batch size needs at its best rate: on the
MNIST-1D CNN question's grid it is 12-15% below a smooth curve through the same points at batch
64, and 0-3% at 128, which alone moves the 20%-overhead point from about 62 to 89.

`smoothed_grid` reads each batch size of a grid without any model of S(B):

1. the best point (the rate with the fewest steps, median over seeds: `pooled_steps`'s rule);
2. every seed's trials at the `WINDOW` rates either side of it that reached the target;
3. a quadratic in log rate fitted to their log steps by least squares, and its minimum over
   those rates: the batch size's steps at its best rate;
4. `DRAWS` draws of the quadratic from its least-squares covariance, each giving a minimum.

`truth_readings` reads the smoothed steps, and every draw, by the model-free rules
(`study.analysis.model_free.model_free_readings`: the 20%-overhead point by log-log
interpolation of ``E(B) / E(B_0)``, the regimes by measured efficiency) and the batch size for
8 accelerators (`answer_truth.batch_for`'s rule): each answer's central reading and its 95%
interval over the draws, the spread that the grid's own noise leaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.analysis.answers import Answer, _choose
from study.analysis.model_free import ModelFree, model_free_readings

WINDOW = 4
"""Rates either side of the best point in each batch size's fit (9 rates of a 1.35-1.42x grid:
about a decade). 3 and 5 move the CNN grid's 20% point to 63 and 67, the MLP's to 507 and 482."""
MIN_RATES = 4
"""Fewer rates that reached around the best than this (a batch size that reached at one to three
rates): its fewest median stands, without an interval."""
DRAWS = 1000
CONFIDENCE = 0.95
ACCELERATORS = 8


@dataclass(frozen=True)
class Smoothed:
    """Per batch size (sorted, those that reached), the smoothed steps and ``draws`` of them
    (draws x batch sizes), and how many trials each fit read."""

    batch_sizes: np.ndarray
    steps: np.ndarray
    draws: np.ndarray
    points: np.ndarray


def smoothed_grid(
    trials: pd.DataFrame, *, window: int = WINDOW, draws: int = DRAWS, seed: int = 0
) -> Smoothed:
    """The smoothed steps per batch size of a grid (``batch_size``, ``learning_rate``,
    ``seed``, ``steps_to_target``; see the module)."""
    rng = np.random.default_rng(seed)
    sizes, central, sampled, points = [], [], [], []
    for batch, group in trials.groupby("batch_size"):
        x = np.log(group["learning_rate"].to_numpy(dtype=float))
        y = np.log(pd.to_numeric(group["steps_to_target"], errors="coerce").to_numpy(dtype=float))
        y = np.where(np.isnan(y), math.inf, y)
        medians = pd.Series(y).groupby(x).median()
        finite = medians[np.isfinite(medians.to_numpy())]
        if finite.empty:
            continue
        rates = np.sort(finite.index.to_numpy())
        best = int(np.searchsorted(rates, finite.idxmin()))
        chosen = rates[max(0, best - window) : best + window + 1]
        keep = np.isin(x, chosen) & np.isfinite(y)
        if chosen.size < MIN_RATES:  # too few rates for a curve: the fewest median, no spread
            sizes.append(float(batch))
            central.append(math.exp(float(finite.min())))
            sampled.append(np.full(draws, central[-1]))
            points.append(int(keep.sum()))
            continue
        design = np.column_stack([x[keep] ** 2, x[keep], np.ones(keep.sum())])
        coef, *_ = np.linalg.lstsq(design, y[keep], rcond=None)
        residual = y[keep] - design @ coef
        dof = max(1, keep.sum() - 3)
        cov = float(residual @ residual) / dof * np.linalg.pinv(design.T @ design)
        coefs = np.vstack([coef, rng.multivariate_normal(coef, cov, draws)])
        span = np.linspace(chosen.min(), chosen.max(), 201)
        minima = np.exp((coefs @ np.vstack([span**2, span, np.ones_like(span)])).min(axis=1))
        sizes.append(float(batch))
        central.append(minima[0])
        sampled.append(minima[1:])
        points.append(int(keep.sum()))
    return Smoothed(np.array(sizes), np.array(central), np.array(sampled).T, np.array(points))


def reading(batch_sizes: np.ndarray, steps: np.ndarray) -> ModelFree:
    """The model-free readings of one curve."""
    frame = pd.DataFrame({"batch_size": batch_sizes, "steps_to_result": steps})
    return model_free_readings(frame)


def batch_for(readings: ModelFree, accelerators: int = ACCELERATORS) -> float:
    """The model-free batch size for ``accelerators``: the rule of `study.analysis.answers`
    (the largest measured size divisible by it) up to ``max(perfect_end, 20% point)`` (the
    model's limit is ``max(perfect_end, critical batch size)``); NaN without readings."""
    if not readings.ok:
        return math.nan
    limit = max(readings.perfect_end, readings.critical)
    sizes = np.asarray(readings.batch_sizes, dtype=float)
    return float(_choose(sizes, accelerators, np.array([limit]))[0])


def truth_readings(smoothed: Smoothed, confidence: float = CONFIDENCE) -> dict[str, Answer]:
    """Each model-free answer of the smoothed grid with its interval over the draws (see the
    module): ``critical_batch``, ``perfect_end``, ``max_parallel_start`` (``inf`` when the
    curve never flattens) and ``recommended_batch``."""
    b = smoothed.batch_sizes
    rows = [reading(b, smoothed.steps)] + [reading(b, s) for s in smoothed.draws]
    values = {
        "critical_batch": [r.critical for r in rows],
        "perfect_end": [r.perfect_end for r in rows],
        "max_parallel_start": [r.max_parallel_start for r in rows],
        "recommended_batch": [batch_for(r) for r in rows],
    }
    tail = (1.0 - confidence) / 2.0
    out = {}
    for name, series in values.items():
        array = np.asarray(series, dtype=float)
        # ends that some draw gave (a measured size, or inf for "beyond"), never interpolated
        low, high = np.quantile(array[1:], [tail, 1.0 - tail], method="inverted_cdf")
        out[name] = Answer(name, float(array[0]), float(low), float(high), name != "critical_batch")
    return out
