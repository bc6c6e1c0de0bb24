"""How the best learning rate grows with batch size: the power law ``lr* = c B^alpha``.

`fit_lr_power_law` fits it by least squares on log-log axes and says whether the interval of
alpha holds the linear scaling rule (alpha = 1) or the square-root rule (alpha = 0.5).

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES, as_number
from study.analysis.threads import one_blas_thread

RateRule = Literal["linear", "square-root", "both", "neither", ""]
"""Which scaling rule the best rate's exponent allows (`LrPowerLawFit.rule`; ``both``:
inconclusive; empty when no fit)."""


@dataclass(frozen=True)
class LrPowerLawFit:
    """``lr* = c B^alpha`` fitted by least squares on log-log axes.

    Fields: ``ok``, ``reason``; ``alpha`` and ``alpha_ci`` (at ``confidence``; ``method``:
    ``"t"``, the t-based OLS interval); ``c``;
    ``r_squared``; ``linear_in_ci`` and ``sqrt_in_ci`` (whether alpha = 1 and alpha = 0.5 lie in
    the interval); ``rule`` (``"linear"``, ``"square-root"``, ``"both"`` (inconclusive) or
    ``"neither"``); ``batch_sizes``, ``learning_rates`` used; ``excluded`` batch sizes (NaN or
    non-positive rate); ``notes``.
    """

    ok: bool
    reason: str = ""
    alpha: float = math.nan
    alpha_ci: tuple[float, float] | None = None
    c: float = math.nan
    r_squared: float = math.nan
    confidence: float = CONFIDENCE
    method: Literal["t"] = "t"
    linear_in_ci: bool = False
    sqrt_in_ci: bool = False
    rule: RateRule = ""
    batch_sizes: tuple[int | float, ...] = ()
    learning_rates: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    notes: tuple[str, ...] = ()

    def predict(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``c * B ** alpha`` (NaN when not ok)."""
        return self.c * np.asarray(batch_size, dtype=float) ** self.alpha

    def prediction_interval(
        self, batch_size: float, confidence: float | None = None
    ) -> tuple[float, float] | None:
        """Where the best learning rate of one more batch size should lie: the t prediction
        interval of ordinary least squares on log-log axes, ``log c + alpha x0 +- t s sqrt(1 +
        1/n + (x0 - mean x)^2 / Sxx)`` with ``s`` the residual standard deviation (so the
        scatter of the measured best rates about the law counts, and it widens away from the
        measured batch sizes). None when not ok or with only 2 batch sizes.

        Example: rates exactly on ``0.001 * B ** 0.5`` give an interval of zero width.
        """
        x = np.log(np.asarray(self.batch_sizes, dtype=float))
        if not self.ok or x.size < 3 or not math.isfinite(self.alpha):
            return None
        y = np.log(np.asarray(self.learning_rates, dtype=float))
        log_c = math.log(self.c)
        dof = x.size - 2
        s = math.sqrt(float(((y - log_c - self.alpha * x) ** 2).sum()) / dof)
        x0 = math.log(batch_size)
        sxx = float(((x - x.mean()) ** 2).sum())
        se = s * math.sqrt(1.0 + 1.0 / x.size + (x0 - float(x.mean())) ** 2 / sxx)
        level = self.confidence if confidence is None else confidence
        half = float(stats.t.ppf((1.0 + level) / 2.0, dof)) * se
        centre = log_c + self.alpha * x0
        return math.exp(centre - half), math.exp(centre + half)


@one_blas_thread
def fit_lr_power_law(
    batch_sizes: Sequence[float],
    best_lrs: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
) -> LrPowerLawFit:
    """Fit ``lr* = c B^alpha`` (ordinary least squares of ``log lr`` on ``log B``).

    The interval for alpha is t-based (``n - 2`` degrees of freedom), checked by simulation
    (``benchmarks/interval_coverage.py``): with every batch size searched alike around its best
    rate, the best rates scatter about the power law alike and it covers alpha about 95% of
    the time. Points with a NaN or non-positive rate are left out; a best
    rate sitting on the edge of its search range (``lr_on_edge``) biases the fit, so consider
    leaving those out first. Fewer than 3 distinct batch sizes give ``ok=False``.

    Example: rates ``0.001 * B ** 0.5`` give ``alpha == 0.5`` and ``rule == "square-root"``.
    """
    b = np.asarray(batch_sizes, dtype=float).ravel()
    lr = np.asarray(best_lrs, dtype=float).ravel()
    if b.shape != lr.shape:
        raise ValueError(
            f"batch_sizes and best_lrs must have the same length (got {b.size} and {lr.size})"
        )
    usable = np.isfinite(lr) & (lr > 0) & (b > 0)
    common = {
        "confidence": confidence,
        "batch_sizes": tuple(as_number(x) for x in b[usable]),
        "learning_rates": tuple(float(x) for x in lr[usable]),
        "excluded": tuple(as_number(x) for x in b[~usable]),
    }
    b, lr = b[usable], lr[usable]
    distinct = np.unique(b).size
    if distinct < MIN_BATCH_SIZES:
        return LrPowerLawFit(
            ok=False,
            reason=(
                f"fewer than {MIN_BATCH_SIZES} batch sizes with a best learning rate ({distinct})"
            ),
            **common,
        )
    x, y = np.log(b), np.log(lr)
    alpha, log_c = _slope(x, y)
    residuals = y - (log_c + alpha * x)
    total = ((y - y.mean()) ** 2).sum()
    r_squared = 1.0 - float((residuals**2).sum() / total) if total > 0 else 1.0
    dof = x.size - 2
    se = math.sqrt((residuals**2).sum() / dof / ((x - x.mean()) ** 2).sum()) if dof else 0.0
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, dof)) * se if dof else math.inf
    ci = (alpha - half, alpha + half)
    slack = 1e-9
    linear = ci is not None and ci[0] - slack <= 1.0 <= ci[1] + slack
    sqrt = ci is not None and ci[0] - slack <= 0.5 <= ci[1] + slack
    rule = {(True, True): "both", (True, False): "linear", (False, True): "square-root"}.get(
        (linear, sqrt), "neither"
    )
    return LrPowerLawFit(
        ok=True,
        alpha=alpha,
        alpha_ci=ci,
        c=math.exp(log_c),
        r_squared=r_squared,
        linear_in_ci=linear,
        sqrt_in_ci=sqrt,
        rule=rule,
        **common,
    )


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of ``y`` on ``x``."""
    xm, ym = x.mean(), y.mean()
    slope = float(((x - xm) * (y - ym)).sum() / ((x - xm) ** 2).sum())
    return slope, float(ym - slope * xm)
