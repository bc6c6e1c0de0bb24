"""The power law of one answer in the training-set size, fitted across a ladder's rungs by
weighted least squares in log-log with a scatter of their own (`study.analysis.data_ladder`
explains the method and uses it)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy import stats

from study.analysis.answers import Answer, Answers
from study.analysis.fitting import CONFIDENCE
from study.analysis.target_law import law_band, log_distance, weighted_least_squares

LadderQuantity = Literal["b_noise", "critical_batch", "recommended_batch", "recommended_lr"]
QUANTITIES: tuple[LadderQuantity, ...] = (
    "b_noise",
    "critical_batch",
    "recommended_batch",
    "recommended_lr",
)
"""The answers fitted against the data size, in the order they are shown."""

NAMES: Mapping[str, str] = {
    "b_noise": "B_noise",
    "critical_batch": "critical batch size",
    "recommended_batch": "best batch size",
    "recommended_lr": "best rate",
}

MIN_RUNGS = 2
"""Rungs a ladder needs (a law through two points has an exponent)."""

GRID_SIGMA = math.log(2.0) / math.sqrt(12.0)
"""The standard deviation, in log units, of rounding to a grid of powers of two (uniform over a
factor of 2): added to the best batch size's interval, which is read on the grid."""


@dataclass(frozen=True)
class Rung:
    """One finished study of the ladder: its ``study`` name, ``data_size`` (training examples),
    ``answers`` (its model of every trial) and what it cost: ``steps`` and ``examples``, over
    its trials, pruned ones included (None when not known)."""

    study: str
    data_size: float
    answers: Answers
    steps: int | None = None
    examples: int | None = None

    @property
    def ok(self) -> bool:
        return self.answers.ok


def _spread(answer: Answer | None, z: float, batch: bool) -> tuple[float, float] | None:
    """``(log estimate, log sigma)`` of an answer, None when it has no finite positive ends
    (or, for a continuous answer, an interval of no width)."""
    if answer is None:
        return None
    ends = (answer.estimate, answer.low, answer.high)
    if not all(math.isfinite(v) and v > 0 for v in ends) or answer.high < answer.low:
        return None
    sigma = (math.log(answer.high) - math.log(answer.low)) / (2.0 * z)
    if batch:
        sigma = math.hypot(sigma, GRID_SIGMA)
    return (math.log(answer.estimate), sigma) if sigma > 0 else None


@dataclass(frozen=True)
class DataLaw:
    """A power law of ``quantity`` in the data size (see the module): ``ok``/``reason``;
    ``coefficients`` (``a``, ``b``: ``log y = a + b log D``) and their ``covariance`` (with the
    weights ``1 / (s_i^2 + tau^2)``); ``scale`` (the residual scale of the fit on the rungs'
    own intervals, at least 1: how much more they scatter than those say); ``tau`` (the rungs'
    scatter of their own, log units; 0 when they scatter no more than their intervals say);
    ``dof``; ``sizes`` and
    ``log_sigma`` (the fitted rungs' data sizes and log-interval widths); ``exponent`` (an
    `Answer` for ``b``); ``confidence``."""

    quantity: LadderQuantity
    ok: bool
    reason: str = ""
    coefficients: tuple[float, float] = (math.nan, math.nan)
    covariance: tuple[tuple[float, float], tuple[float, float]] = (
        (math.nan, math.nan),
        (math.nan, math.nan),
    )
    scale: float = math.nan
    tau: float = 0.0
    dof: int = 0
    sizes: tuple[float, ...] = ()
    log_sigma: tuple[float, ...] = ()
    exponent: Answer | None = None
    confidence: float = CONFIDENCE

    @property
    def name(self) -> str:
        return NAMES[self.quantity]

    @property
    def size_range(self) -> tuple[float, float]:
        """The fitted rungs' data sizes, smallest and largest."""
        return (min(self.sizes), max(self.sizes)) if self.sizes else (math.nan, math.nan)

    def distance(self, size: float) -> float:
        """How far ``size`` lies beyond the fitted rungs, in fitted ranges of ``log D`` (0
        inside them)."""
        return log_distance(size, self.size_range)

    def text(self) -> str:
        """``"B_noise ~ D^0.41 (0.22 to 0.60)"``, or why there is no law."""
        if not self.ok or self.exponent is None:
            return f"no law for the {self.name}: {self.reason}"
        e = self.exponent
        return f"{self.name} ~ D^{e.estimate:.2g} ({e.low:.2g} to {e.high:.2g})"

    def words(self) -> str:
        """What the exponent's interval says: the answer rises, falls or shows no trend."""
        if not self.ok or self.exponent is None:
            return ""
        e = self.exponent
        if e.low > 0:
            return "rises with the data"
        if e.high < 0:
            return "falls with the data"
        return "no trend resolved (the interval holds 0)"

    def curve(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The law at ``sizes`` with the interval of its value there (as `predict`)."""
        return law_band(self.coefficients, self.covariance, sizes, self._quantile(), self.tau**2)

    def predict(self, size: float) -> Answer:
        """The interval of the answer at data size ``size`` (see the module).

        Raises:
            ValueError: if the law is not ok or ``size`` is not positive.
        """
        if not self.ok:
            raise ValueError(f"no law to predict with: {self.reason}")
        if not size > 0:
            raise ValueError(f"the data size must be positive (got {size})")
        value, low, high = (float(v[0]) for v in self.curve(np.array([size], dtype=float)))
        return Answer(self.name, value, low, high, self.quantity == "recommended_batch")

    def shares(self, size: float) -> tuple[float, ...]:
        """Each fitted rung's share of the variance of the law's value at ``size`` (in the
        order of `sizes`; they sum to 1): the prediction is a weighted sum of the rungs'
        answers, ``x0' (X' W X)^-1 X' W y``, so rung i adds ``c_i^2 (s_i^2 + tau^2)``. A rung
        far from ``size`` or with a wide interval of its own carries most of it.

        Example: rungs at 4,000 and 6,000 predicting 8,000 weigh the larger one's answer by
        1.71 and the smaller one's by -0.71: with equal intervals, 85% and 15%.
        """
        if not self.ok:
            return ()
        variance = np.array(self.log_sigma) ** 2 + self.tau**2
        design = np.column_stack([np.ones(len(self.sizes)), np.log(self.sizes)])
        inverse = np.linalg.inv(design.T @ (design / variance[:, None]))
        weights = np.array([1.0, math.log(size)]) @ inverse @ (design / variance[:, None]).T
        parts = weights**2 * variance
        return tuple(float(v) for v in parts / parts.sum())

    def _quantile(self) -> float:
        """The normal quantile of the confidence: the rungs' intervals are known variances."""
        return float(stats.norm.ppf(0.5 + self.confidence / 2.0))


def fit_data_law(
    rungs: Sequence[Rung], quantity: LadderQuantity, confidence: float = CONFIDENCE
) -> DataLaw:
    """The power law of ``quantity`` in the data size across the ``rungs`` with an answer and
    an interval (see the module); not ok, with the reason, with fewer than `MIN_RUNGS`."""
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    points = [
        (float(r.data_size), *spread)
        for r in rungs
        if (spread := _spread(getattr(r.answers, quantity), z, quantity == "recommended_batch"))
    ]
    if len({p[0] for p in points}) < MIN_RUNGS:
        return DataLaw(
            quantity,
            ok=False,
            reason=f"a law in the data size needs at least {MIN_RUNGS} rungs of different sizes "
            f"with a finite {NAMES[quantity]} and interval (got {len(points)})",
            confidence=confidence,
        )
    x, y, s = (np.array(column) for column in zip(*points))
    design = np.column_stack([np.ones(x.size), np.log(x)])
    coef, rss, inv = weighted_least_squares(design, y, 1.0 / s**2)
    dof = x.size - 2
    tau2 = 0.0
    if dof > 0:
        w = 1.0 / s**2
        weighted = design.T * w
        trace = float(np.sum(w) - np.trace(inv @ (weighted @ (design * w[:, None]))))
        tau2 = max(0.0, (rss - dof) / trace)
        if tau2 > 0:
            coef, _, inv = weighted_least_squares(design, y, 1.0 / (s**2 + tau2))
    scale = math.sqrt(max(1.0, rss / dof)) if dof > 0 else 1.0
    cov = inv
    law = DataLaw(
        quantity,
        ok=True,
        coefficients=(float(coef[0]), float(coef[1])),
        covariance=((float(cov[0, 0]), float(cov[0, 1])), (float(cov[1, 0]), float(cov[1, 1]))),
        scale=scale,
        tau=math.sqrt(tau2),
        dof=dof,
        sizes=tuple(float(v) for v in x),
        log_sigma=tuple(float(v) for v in s),
        confidence=confidence,
    )
    half = law._quantile() * math.sqrt(cov[1, 1])
    b = float(coef[1])
    return replace(law, exponent=Answer("exponent", b, b - half, b + half))
