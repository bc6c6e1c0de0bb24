"""What the fits share: their minimum of batch sizes, the default confidence, percentile
intervals of bootstrap replicates (the optional case bootstrap of `fit_lr_power_law`), and
batch sizes as plain numbers.

The fits themselves live in one module per model: `study.analysis.noise_scale` (McCandlish et
al.'s S(B)), `study.analysis.regimes` (Shallue et al.'s scaling regimes) and
`study.analysis.lr_scaling` (the learning-rate power law); `study.analysis.recommend` turns them
into a decision.
"""

from __future__ import annotations

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
