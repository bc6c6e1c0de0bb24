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
`target_prediction.predict_target`) is an interval for the answer at that target itself (the
law's value there), not for what a study run to it would measure: that study adds its own
estimation noise (`agrees` compares a measured answer with a prediction). Every level comes from
the same trials, so each level's error (variance ``s_i^2``) has a part the levels share, which
moves them together and is invisible in their scatter about the law, and a part of their own,
which the scatter measures: its share ``phi = RSS_w / (n - k)`` (not floored at 1). The shared
part passes to the prediction as the error of the level it rests on, the nearest; the own part
through the regression::

    var(x0) = max(0, 1 - phi) s_near^2 + phi x0' (X' W X)^-1 x0

with Student's t on the Welch-Satterthwaite degrees of freedom of the estimated part (``n - k``
when ``phi >= 1``, the normal quantile as ``phi`` goes to 0). The drawn band (`TargetLaw.curve`)
is the same interval along the axis. The exponent's interval treats the levels as independent
(the covariance ``r^2 (X' W X)^-1``, Student's t): their shared error also tilts the law, which
the scatter cannot separate, so it is the wider, safe reading. ``benchmarks/target_law_coverage.py``
measures the coverage (simulator ``benchmarks/sim/levels.py``), against the law and against
verifying studies: the 95% interval held the law's value in 93.8-97.5% of 240 studies (80%:
80.4-85.0%).

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
    ``covariance`` (scaled by ``scale**2``: the levels taken as independent); ``scale`` (the
    residual scale ``r``, at least 1); ``own_share`` (``phi``: the levels' own share of their
    variance, from their scatter); ``dof``; ``p_value`` (the F test's); ``x`` and ``log_sigma``
    (the fitted levels' axis values and log-interval widths); ``exponent``: an `Answer` for
    ``b`` (None for a constant); ``confidence``.
    """

    quantity: Quantity
    ok: bool
    reason: str = ""
    kind: LawKind = "constant"
    coefficients: tuple[float, float] = (math.nan, 0.0)
    covariance: tuple[tuple[float, float], tuple[float, float]] = ((math.nan, 0.0), (0.0, 0.0))
    scale: float = math.nan
    own_share: float = math.nan
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
        return log_distance(x0, self.x_range)

    def curve(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law at ``x`` with the interval of its value there (`interval`)."""
        return self.interval(np.asarray(x, dtype=float))

    def interval(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law's value at each of ``x`` and its interval (see the module: the levels'
        shared error as the nearest level's, their own through the regression)."""
        lx = np.log(np.asarray(x, dtype=float))
        design = np.column_stack([np.ones_like(lx), lx])
        mean = design @ np.asarray(self.coefficients)
        inverse = np.asarray(self.covariance) / self.scale**2
        h2 = np.einsum("ij,jk,ik->i", design, inverse, design)
        fitted = np.log(np.asarray(self.x))
        near = np.asarray(self.log_sigma)[np.argmin(np.abs(lx[:, None] - fitted), axis=1)] ** 2
        phi = self.own_share
        if phi < 1.0:
            var, estimated = (1.0 - phi) * near + phi * h2, phi * np.abs(h2 - near)
        else:
            var = estimated = phi * h2
        with np.errstate(divide="ignore"):
            nu = np.where(
                estimated > 0, self.dof * var**2 / np.maximum(estimated, 1e-300) ** 2, np.inf
            )
        tail = 0.5 + self.confidence / 2.0
        quantile = np.where(
            np.isfinite(nu), stats.t.ppf(tail, np.minimum(nu, 1e9)), stats.norm.ppf(tail)
        )
        half = quantile * np.sqrt(var)
        return np.exp(mean), np.exp(mean - half), np.exp(mean + half)

    def predict(self, x0: float) -> Answer:
        """The interval of the law's value at axis value ``x0`` (see the module).

        Raises:
            ValueError: if the law is not ok or ``x0`` is not positive.
        """
        if not self.ok:
            raise ValueError(f"no law to predict with: {self.reason}")
        if not x0 > 0:
            raise ValueError(f"the axis value must be positive (got {x0})")
        value, low, high = (float(v[0]) for v in self.interval(np.array([x0])))
        return Answer(self.name, value, low, high)


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
    power, rss_power, inv_power = weighted_least_squares(design, y, w)
    const, rss_const, inv_const = weighted_least_squares(design[:, :1], y, w)
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
    own = rss / dof
    scale = math.sqrt(max(1.0, own))
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
        own_share=own,
        dof=dof,
        p_value=p_value,
        x=tuple(float(v) for v in x),
        log_sigma=tuple(float(v) for v in s),
        exponent=exponent,
        confidence=confidence,
    )


def log_distance(x0: float, fitted: tuple[float, float]) -> float:
    """How far ``x0`` lies beyond ``fitted`` (smallest, largest), in fitted ranges of its log
    (0 inside them).

    Example: 40,000 beyond (10,000, 20,000) is 1.0: one more doubling past a range of one.
    """
    low, high = np.log(fitted)
    lx = math.log(x0)
    return max(0.0, low - lx, lx - high) / max(high - low, 1e-12)


def weighted_least_squares(
    design: np.ndarray, y: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    """Weighted least squares: coefficients, weighted residual sum of squares, (X'WX)^-1."""
    xtw = design.T * w
    inv = np.linalg.inv(xtw @ design)
    coef = inv @ (xtw @ y)
    resid = y - design @ coef
    return coef, float(np.sum(w * resid**2)), inv


def law_band(
    coefficients: Sequence[float],
    covariance: Any,
    x: Any,
    quantile: float,
    extra: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A law ``log y = a + b log x`` at ``x`` with its band of ``quantile`` standard errors:
    the coefficients' uncertainty, plus ``extra`` (a variance in log units) at every ``x``."""
    lx = np.log(np.asarray(x, dtype=float))
    design = np.column_stack([np.ones_like(lx), lx])
    mean = design @ np.asarray(coefficients)
    var = np.einsum("ij,jk,ik->i", design, np.asarray(covariance), design) + extra
    half = quantile * np.sqrt(var)
    return np.exp(mean), np.exp(mean - half), np.exp(mean + half)


def agrees(predicted: Answer, measured: Answer) -> bool:
    """Whether a study's ``measured`` answer agrees with a ``predicted`` one at their common
    confidence: their log distance within the two intervals' half-widths (each on the side
    facing the other) added in quadrature, as the difference of two independent estimates.

    Example: ``agrees(Answer("b", 100, 80, 125), Answer("b", 130, 110, 154))`` is True: the
    distance log 1.3 = 0.26 is within hypot(log 1.25, log(130 / 110)) = 0.28.
    """
    ends = (predicted.estimate, predicted.low, predicted.high, measured.estimate)
    ends += (measured.low, measured.high)
    if not all(math.isfinite(v) and v > 0 for v in ends):
        return False
    gap = math.log(measured.estimate / predicted.estimate)
    mine = predicted.high if gap >= 0 else predicted.low
    theirs = measured.low if gap >= 0 else measured.high
    reach = math.hypot(math.log(mine / predicted.estimate), math.log(theirs / measured.estimate))
    return abs(gap) <= reach
