"""What the fits share: their minimum of batch sizes, the default confidence, percentile
intervals of bootstrap replicates (the optional case bootstrap of `fit_lr_power_law`), batch
sizes as plain numbers, an interval with an open end in words, and finite differences that evaluate every point in one vectorised
call (the gradient and Hessian of `study.analysis.surrogate`'s likelihood).

The fits themselves live in one module per model: `study.analysis.noise_scale` (McCandlish et
al.'s S(B)), `study.analysis.regimes` (Shallue et al.'s scaling regimes) and
`study.analysis.lr_scaling` (the learning-rate power law); `study.analysis.recommend` turns them
into a decision.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

MIN_BATCH_SIZES = 3
"""A fit needs at least this many distinct batch sizes: S(B) and lr* = c B^alpha have two
parameters each, and a third point is the least that says anything about the shape."""

CONFIDENCE = 0.95
"""The default confidence of every interval (profile-likelihood, t and bootstrap intervals)."""


def as_number(value: Any) -> int | float:
    """``value`` as an int when it is whole, else as a float.

    Example: ``as_number(128.0) == 128`` (shown as ``128``, not ``128.0``); ``as_number(0.5) ==
    0.5``.
    """
    x = float(value)
    return int(x) if x.is_integer() else x


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The central ``confidence`` percentile interval of the finite ``samples`` (None if none).

    Example: with ``confidence=0.95`` the 2.5% and 97.5% quantiles.
    """
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return float(low), float(high)


#: The relative step of the forward differences that give the optimiser its gradient (the
#: step scipy's own finite differences take: the square root of the float64 epsilon).
FORWARD_STEP = 1.49e-8


def value_and_gradient(
    values: Callable[[np.ndarray], np.ndarray], x: np.ndarray, upper: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """``values`` at ``x`` and its forward-difference gradient, every point in one call
    (``values`` maps rows of points to their values); a step that would pass ``upper`` goes
    the other way."""
    h = FORWARD_STEP * np.maximum(1.0, np.abs(x))
    if upper is not None:
        h = np.where(x + h > upper, -h, h)
    v = values(np.vstack([x, x + np.diag(h)]))
    return float(v[0]), (v[1:] - v[0]) / h


def hessian(
    f: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, free: list[int]
) -> np.ndarray:
    """Central differences of ``f`` (which maps rows of parameter vectors to values) over the
    ``free`` parameters, every point in one call."""
    n = len(free)
    h = np.array([1e-3 * max(1.0, abs(theta[i])) for i in free])
    pairs = [(a, c) for a in range(n) for c in range(a, n)]
    corners = ((1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1))
    points = np.repeat(theta[None, :], 4 * len(pairs), axis=0)
    for row, ((a, c), (sa, sc, _)) in enumerate(
        (pair, corner) for pair in pairs for corner in corners
    ):
        points[row, free[a]] += sa * h[a]
        points[row, free[c]] += sc * h[c]
    values = f(points).reshape(len(pairs), 4) @ np.array([sign for *_, sign in corners], float)
    out = np.empty((n, n))
    for (a, c), total in zip(pairs, values, strict=True):
        out[a, c] = out[c, a] = total / (4.0 * h[a] * h[c])
    return out


def open_range_words(
    low: float,
    high: float,
    show: Callable[[float], str],
    open_low: bool = False,
    open_high: bool = False,
) -> str | None:
    """An interval with an open end in words (``"at least 66"``, ``"at most 300"``, ``"not
    bounded by the trials"``), each number written by ``show``; an end is open when flagged or
    infinite; None when neither is."""
    open_low = open_low or math.isinf(low)
    open_high = open_high or math.isinf(high)
    if open_low and open_high:
        return "not bounded by the trials"
    if open_high:
        return f"at least {show(low)}"
    if open_low:
        return f"at most {show(high)}"
    return None
