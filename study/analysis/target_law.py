"""A law of an answer across target levels, and its extrapolation to a level not reached.

Across the levels of a `TargetSweep`, B_noise (or the critical batch size) is fitted against
the law's axis ``x`` (the loss, or the error ``1 - accuracy``: `axis_value`) by weighted least
squares in log-log, each level weighted by its interval (``s_i``: the interval's half-width in
log units over the normal quantile of the confidence)::

    power law:  log y = a + b log x       (Kaplan et al. 2020: B_crit(L) ~ B* / L^(1/alpha_B))
    constant:   log y = a

and the data choose: the power law when an F test of the nested fits,
``F = (RSS_constant - RSS_power) / r^2`` on (1, n - 2) degrees of freedom, rejects the constant
at `LAW_P_VALUE` (then the exponent's interval excludes 0). The form is chosen on B_noise, the
answer each level measures best; the critical batch size (whose intervals also carry the knee's
uncertainty, too wide to choose by) takes the same form (`target_prediction.target_scaling`).
The fit's residual scale ``r = sqrt(max(1, RSS_w / (n - k)))`` (the levels scatter more than
their intervals say: ``r > 1``) widens every interval.

A prediction at a level ``x0`` (`TargetLaw.predict`, on the power-law fit: see
`target_prediction.predict_target`) is a prediction interval: the law's parameter uncertainty
and the scatter of one level about the law, ``r^2 (s_near^2 + x0' (X' W X)^-1 x0)`` with ``s_near``
the interval of the fitted level nearest to ``x0``, and the normal quantile while ``r`` is 1 (the
levels' own intervals set the variance), Student's t with ``n - k`` degrees of freedom once the
residuals do (``r > 1``). Every level comes from the same trials, so the levels' errors move
together: the ``s_near`` term carries that common shift (the law's own terms, fitted as if the
levels were independent, do not). ``benchmarks/target_law_coverage.py`` measures the coverage
(simulator ``benchmarks/sim/levels.py``), against the law and against verifying studies.

A prediction is refused (``ok`` False, ``reason`` one sentence) with fewer than `MIN_LEVELS`
levels with answers, at a level whose axis is not positive, or farther than `MAX_DISTANCE`
fitted ranges (in ``log x``) beyond the fitted levels.

Example::

    law = fit_law(sweep, "b_noise")
    law.kind, law.exponent          # "power", -2.6: B_noise ~ error^-2.6
    law.predict(0.3).text()         # "780 (520-1170)"
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from study.analysis.answers import Answer
from study.analysis.target_levels import TargetSweep, axis_value

LawKind = Literal["power", "constant"]
Quantity = Literal["b_noise", "critical_batch"]

MIN_LEVELS = 3
"""Levels with answers a law needs (two coefficients and one degree of freedom)."""

MAX_DISTANCE = 1.0
"""The farthest a prediction reaches beyond the fitted levels, in fitted ranges of ``log x``."""

LAW_P_VALUE = 0.05
"""The F test's level: the power law is chosen when the constant is rejected at it."""

SELECTION = "F test of a power law against a constant at p < 0.05"
"""How the law is chosen, as the report states it."""

NAMES = {"b_noise": "B_noise", "critical_batch": "critical batch size"}


@dataclass(frozen=True)
class TargetLaw:
    """A fitted law of ``quantity`` across target levels (see the module).

    ``ok``/``reason``; ``kind`` (``power`` or ``constant``, chosen by `SELECTION`);
    ``coefficients`` (``a``, ``b``: ``log y = a + b log x``; ``b`` 0 for a constant) and their
    ``covariance`` (scaled by ``scale**2``); ``scale`` (the residual scale ``r``, at least 1);
    ``dof``; ``p_value`` (the F test's); ``x`` and ``log_sigma`` (the fitted levels' axis
    values and log-interval widths); ``exponent``: an `Answer` for ``b`` (None for a
    constant); ``confidence``.
    """

    quantity: Quantity
    ok: bool
    reason: str = ""
    kind: LawKind = "constant"
    coefficients: tuple[float, float] = (math.nan, 0.0)
    covariance: tuple[tuple[float, float], tuple[float, float]] = ((math.nan, 0.0), (0.0, 0.0))
    scale: float = math.nan
    dof: int = 0
    p_value: float = math.nan
    x: tuple[float, ...] = ()
    log_sigma: tuple[float, ...] = ()
    exponent: Answer | None = None
    confidence: float = 0.95

    @property
    def name(self) -> str:
        return NAMES[self.quantity]

    @property
    def x_range(self) -> tuple[float, float]:
        """The fitted levels' axis values, smallest and largest."""
        return (min(self.x), max(self.x)) if self.x else (math.nan, math.nan)

    def distance(self, x0: float) -> float:
        """How far ``x0`` lies beyond the fitted levels, in fitted ranges of ``log x`` (0
        inside them)."""
        low, high = np.log(self.x_range)
        span = max(high - low, 1e-12)
        lx = math.log(x0)
        return max(0.0, low - lx, lx - high) / span

    def curve(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law at ``x`` with its confidence band (the law's uncertainty alone)."""
        return law_band(self.coefficients, self.covariance, x, self._quantile())

    def predict(self, x0: float) -> Answer:
        """The prediction interval at axis value ``x0`` (see the module).

        Raises:
            ValueError: if the law is not ok or ``x0`` is not positive.
        """
        if not self.ok:
            raise ValueError(f"no law to predict with: {self.reason}")
        if not x0 > 0:
            raise ValueError(f"the axis value must be positive (got {x0})")
        value, low, high = law_interval(
            self.coefficients, self.covariance, self.x, self.scale * np.asarray(self.log_sigma),
            x0, self._quantile(),
        )  # fmt: skip
        return Answer(self.name, value, low, high)

    def _quantile(self) -> float:
        """The interval's quantile: normal while the levels' own intervals set the variance
        (``scale`` 1), Student's t on ``dof`` once the scatter is estimated from the residuals."""
        tail = 0.5 + self.confidence / 2.0
        if self.scale > 1.0:
            return float(stats.t.ppf(tail, max(self.dof, 1)))
        return float(stats.norm.ppf(tail))


def fit_law(
    sweep: TargetSweep, quantity: Quantity = "b_noise", kind: LawKind | None = None
) -> TargetLaw:
    """The law of ``quantity`` across the levels of ``sweep`` with answers (see the module),
    of the form ``kind`` (None: chosen by `SELECTION`)."""
    confidence = sweep.confidence
    z = stats.norm.ppf(0.5 + confidence / 2.0)
    x, y, s = [], [], []
    for level in sweep.answered():
        answer = getattr(level.answers, quantity)
        ax = float(axis_value(sweep.target, level.threshold))
        if answer is None or not ax > 0:
            continue
        ends = (answer.estimate, answer.low, answer.high)
        if not all(math.isfinite(v) and v > 0 for v in ends) or answer.high <= answer.low:
            continue
        x.append(ax)
        y.append(math.log(answer.estimate))
        s.append((math.log(answer.high) - math.log(answer.low)) / (2.0 * z))
    if len(x) < MIN_LEVELS:
        return TargetLaw(
            quantity,
            ok=False,
            reason=f"a law across targets needs at least {MIN_LEVELS} levels with a finite "
            f"{NAMES[quantity]} and interval (got {len(x)})",
            confidence=confidence,
        )
    return _fit(quantity, np.array(x), np.array(y), np.array(s), confidence, kind)


def _fit(
    quantity: Quantity,
    x: np.ndarray,
    y: np.ndarray,
    s: np.ndarray,
    confidence: float,
    chosen: LawKind | None,
) -> TargetLaw:
    """Both fits, the F test between them, the chosen one's scaled covariance."""
    n = x.size
    w = 1.0 / s**2
    design = np.column_stack([np.ones(n), np.log(x)])
    power, rss_power, inv_power = _wls(design, y, w)
    const, rss_const, inv_const = _wls(design[:, :1], y, w)
    # The residual scale is never below the levels' own intervals: F = b^2 / var(b).
    f = (rss_const - rss_power) / max(1.0, rss_power / (n - 2))
    p_value = float(stats.f.sf(f, 1, n - 2))
    kind: LawKind = chosen or ("power" if p_value < LAW_P_VALUE else "constant")
    if kind == "power":
        coef, rss, inv, k = power, rss_power, inv_power, 2
    else:
        coef = np.array([const[0], 0.0])
        rss, k = rss_const, 1
        inv = np.array([[inv_const[0, 0], 0.0], [0.0, 0.0]])
    dof = n - k
    scale = math.sqrt(max(1.0, rss / dof))
    cov = inv * scale**2
    exponent = None
    if kind == "power":
        t = stats.t.ppf(0.5 + confidence / 2.0, dof)
        se = math.sqrt(cov[1, 1])
        exponent = Answer("exponent", float(coef[1]), coef[1] - t * se, coef[1] + t * se)
    return TargetLaw(
        quantity,
        ok=True,
        kind=kind,
        coefficients=(float(coef[0]), float(coef[1])),
        covariance=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
        scale=scale,
        dof=dof,
        p_value=p_value,
        x=tuple(float(v) for v in x),
        log_sigma=tuple(float(v) for v in s),
        exponent=exponent,
        confidence=confidence,
    )


def _wls(design: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Weighted least squares: coefficients, weighted residual sum of squares, (X'WX)^-1."""
    xtw = design.T * w
    inv = np.linalg.inv(xtw @ design)
    coef = inv @ (xtw @ y)
    resid = y - design @ coef
    return coef, float(np.sum(w * resid**2)), inv


def law_band(
    coefficients: Sequence[float], covariance: Any, x: Any, quantile: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A law ``log y = a + b log x`` at ``x`` with its band of ``quantile`` standard errors
    (the law's uncertainty alone)."""
    lx = np.log(np.asarray(x, dtype=float))
    design = np.column_stack([np.ones_like(lx), lx])
    mean = design @ np.asarray(coefficients)
    se = np.sqrt(np.einsum("ij,jk,ik->i", design, np.asarray(covariance), design))
    return np.exp(mean), np.exp(mean - quantile * se), np.exp(mean + quantile * se)


def law_interval(
    coefficients: Sequence[float],
    covariance: Any,
    x_fitted: Any,
    log_scatter: Any,
    x0: float,
    quantile: float,
) -> tuple[float, float, float]:
    """The law's prediction at ``x0`` and its interval: the law's uncertainty plus the scatter
    (log units) of the fitted point nearest ``x0``."""
    lx = math.log(x0)
    row = np.array([1.0, lx])
    mean = float(row @ np.asarray(coefficients))
    nearest = int(np.argmin(np.abs(np.log(np.asarray(x_fitted, dtype=float)) - lx)))
    var = float(np.asarray(log_scatter)[nearest]) ** 2 + float(row @ np.asarray(covariance) @ row)
    half = quantile * math.sqrt(var)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)
