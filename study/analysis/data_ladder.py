"""The answers along a ladder of studies at growing training-set sizes, their laws in the data
size, and the answer at the next rung.

The critical batch size grows with the amount of data (Zhang et al. 2024, "How Does Critical
Batch Size Scale in Pre-training?"), and the best batch size and rate follow power laws in it
(Bergsma et al. 2025, "Power Lines"). A ladder is several finished studies of one workload
and target, each trained on a training set of its own size ``D`` (a *rung*); each rung's
answers come from its model of every trial (`study.analysis.answers`). Across the rungs, each
of `QUANTITIES` is fitted against ``D`` by weighted least squares in log-log, as
`study.analysis.target_law` fits a law across targets::

    log y = a + b log D        (y ~ D^b; b with its interval, "B_noise ~ D^0.41 (0.22 to 0.60)")

each rung weighted by its interval (``s_i``: the half-width in log units over the normal
quantile). The rungs are separate studies, so their errors are independent, as the weights
assume, and their intervals are known variances: the normal quantile throughout. Rungs that
scatter about the law more than their intervals say have a scatter of their own, ``tau^2``,
added to every rung's variance as in a random-effects meta-regression (DerSimonian and Laird
1986, method of moments)::

    tau^2 = max(0, (RSS_w - (n - 2)) / tr(P)),   P = W - W X (X' W X)^-1 X' W

(0 with two rungs, which fit the law exactly), and the law is refitted with the weights
``1 / (s_i^2 + tau^2)``. The best batch size is read on a grid of powers of two, so its
``s_i`` also carries the grid's rounding (`GRID_SIGMA`).

`DataLadder.predict` gives the answers at a data size no rung trained on, each an interval for
the answer at that size itself (a rung's true answer there): the law's uncertainty and the
rungs' own scatter, ``x0' Cov x0 + tau^2``. A study run at that size measures it with its own
estimation noise on top (`study.analysis.target_law.agrees` compares such a measurement with
the prediction). The batch size for N accelerators follows the answers' rule from the predicted critical batch
size and the end of perfect scaling (the largest rung's, in proportion to B_noise), as
`study.analysis.target_prediction` predicts it across targets; the best rate (at the
recommended batch size) comes from its own law. A prediction farther than
`study.analysis.target_law.MAX_DISTANCE` fitted ranges of ``log D`` beyond the rungs is refused,
with the reason: with rungs at 10,000 and 20,000 examples, up to 40,000.
``benchmarks/data_ladder_coverage.py`` measures the coverage in a simulator whose law is known:
the 95% interval held the law's value in 97.8% (B_noise) and 99.4% (critical batch size) of
318 predictions, about as often as the rungs' own intervals held theirs (97.4%).

Example::

    ladder = fit_ladder([Rung("d5k", 5000, a1), Rung("d10k", 10000, a2), Rung("d20k", 20000, a3)])
    ladder.laws["b_noise"].text()          # "B_noise ~ D^0.52 (0.31 to 0.73)"
    ladder.predict(40000).line()
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from study.analysis.answers import Answer, Answers
from study.analysis.fitting import CONFIDENCE
from study.analysis.target_law import MAX_DISTANCE, law_band, weighted_least_squares
from study.analysis.target_prediction import power_of_two_batch
from study.config.target import Target

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
        low, high = np.log(self.size_range)
        lx = math.log(size)
        return max(0.0, low - lx, lx - high) / max(high - low, 1e-12)

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


@dataclass(frozen=True)
class LadderPrediction:
    """The answers at ``data_size`` from the laws (see the module): ``ok``/``reason``;
    ``distance`` (fitted ranges of ``log D`` beyond the rungs; 0 inside them); ``fitted``
    (the rungs' sizes, ``"5,000-20,000"``); ``largest`` (the largest rung's size);
    ``b_noise``, ``critical_batch``, ``recommended_batch``, ``recommended_lr`` (`Answer`,
    intervals for the answer at that size itself; None when refused or without a law); ``accelerators``."""

    data_size: float
    ok: bool
    reason: str = ""
    distance: float = math.nan
    fitted: str = ""
    largest: float = math.nan
    accelerators: int = 8
    b_noise: Answer | None = None
    critical_batch: Answer | None = None
    recommended_batch: Answer | None = None
    recommended_lr: Answer | None = None

    @property
    def assumption(self) -> str:
        """``"for 40,000 training examples, extrapolated 2x past the largest rung (rungs
        5,000-20,000)"`` (``"interpolated"`` inside the rungs)."""
        size = f"for {self.data_size:,.0f} training examples"
        if self.distance == 0:
            return f"{size}, interpolated between the rungs {self.fitted}"
        if self.data_size > self.largest:
            factor = self.data_size / self.largest
            return f"{size}, extrapolated {factor:.3g}x past the largest rung (rungs {self.fitted})"
        return f"{size}, extrapolated below the smallest rung (rungs {self.fitted})"

    def line(self) -> str:
        """One line: the assumption and the predicted answers, or the refusal."""
        if not self.ok:
            return f"no prediction for {self.data_size:,.0f} training examples: {self.reason}"
        shown = [
            f"{NAMES[n]} {a.text()}"
            if n != "recommended_batch"
            else f"batch size for {self.accelerators} accelerators {a.text()}"
            for n in QUANTITIES
            if (a := getattr(self, n)) is not None
        ]
        return f"{self.assumption}: " + ", ".join(shown)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "data_size": self.data_size,
            "ok": self.ok,
            "reason": self.reason,
            "assumption": self.assumption,
            "distance": self.distance if math.isfinite(self.distance) else None,
            "fitted": self.fitted,
            "accelerators": self.accelerators,
        }
        for name in QUANTITIES:
            answer = getattr(self, name)
            out[name] = None if answer is None else answer.to_dict()
        return out


@dataclass(frozen=True)
class DataLadder:
    """The rungs (smallest first), the ``laws`` by quantity (`QUANTITIES`), the
    ``accelerators`` every rung's batch size is for, ``confidence`` and the ``target`` the
    rungs answer for (None when not said)."""

    rungs: tuple[Rung, ...]
    laws: Mapping[str, DataLaw] = field(default_factory=dict)
    accelerators: int = 8
    confidence: float = CONFIDENCE
    target: Target | None = None

    @property
    def sizes(self) -> tuple[float, ...]:
        return tuple(r.data_size for r in self.rungs)

    def fitted_text(self) -> str:
        """The rungs' data sizes, ``"5,000-20,000"``."""
        return f"{min(self.sizes):,.0f}-{max(self.sizes):,.0f}"

    def frame(self) -> pd.DataFrame:
        """One row per rung: ``study``, ``data_size``, ``ok``, ``reason``, ``training_steps``,
        ``training_examples`` and each of `QUANTITIES` with ``_low`` and ``_high`` (NaN where
        the model has no answer)."""
        rows = []
        for rung in self.rungs:
            row: dict[str, object] = {
                "study": rung.study,
                "data_size": rung.data_size,
                "ok": rung.ok,
                "reason": rung.answers.reason,
                "training_steps": rung.steps,
                "training_examples": rung.examples,
            }
            for name in QUANTITIES:
                answer = getattr(rung.answers, name)
                for suffix, attr in (("", "estimate"), ("_low", "low"), ("_high", "high")):
                    row[name + suffix] = math.nan if answer is None else getattr(answer, attr)
            rows.append(row)
        return pd.DataFrame(rows)

    def predict(self, data_size: float) -> LadderPrediction:
        """The answers at ``data_size`` (see the module); refused, with the reason, without a
        law of the critical batch size or past `MAX_DISTANCE` fitted ranges."""
        common = {
            "data_size": float(data_size),
            "fitted": self.fitted_text(),
            "largest": max(self.sizes),
            "accelerators": self.accelerators,
        }
        if not (math.isfinite(data_size) and data_size > 0):
            return LadderPrediction(
                ok=False, reason=f"the data size must be above 0 (got {data_size:g})", **common
            )
        law = self.laws["critical_batch"]
        if not law.ok:
            return LadderPrediction(ok=False, reason=law.reason, **common)
        distance = law.distance(data_size)
        if distance > MAX_DISTANCE + 1e-9:  # exactly at the limit (2x past two rungs): kept
            low, high = law.size_range
            reach = high * (high / low) ** MAX_DISTANCE
            return LadderPrediction(
                ok=False,
                distance=distance,
                reason=f"it lies {distance:.2g} fitted ranges (in log data size) beyond the rungs "
                f"{self.fitted_text()}; the law is trusted up to {MAX_DISTANCE:g} (up to "
                f"{reach:,.0f} examples): add a rung nearer to it",
                **common,
            )
        critical = law.predict(data_size)
        noise = self.laws["b_noise"]
        b_noise = noise.predict(data_size) if noise.ok else None
        rate = self.laws["recommended_lr"]
        return LadderPrediction(
            ok=True,
            distance=distance,
            b_noise=b_noise,
            critical_batch=critical,
            recommended_batch=self._batch(critical, b_noise),
            recommended_lr=rate.predict(data_size) if rate.ok else None,
            **common,
        )

    def _batch(self, critical: Answer, b_noise: Answer | None) -> Answer:
        """The answers' rule at the predicted critical batch size and end of perfect scaling:
        the largest ``accelerators * 2^k`` up to the larger of them, at the estimate and ends."""
        ratio = 0.0
        last = next((r.answers for r in reversed(self.rungs) if r.ok), None)
        if last is not None and last.perfect_end is not None and last.b_noise is not None:
            ratio = last.perfect_end.estimate / last.b_noise.estimate
        noise = (b_noise.estimate, b_noise.low, b_noise.high) if b_noise else (0.0, 0.0, 0.0)
        limits = zip((critical.estimate, critical.low, critical.high), noise)
        ends = [power_of_two_batch(max(c, ratio * b), self.accelerators) for c, b in limits]
        return Answer(f"batch size for {self.accelerators} accelerator(s)", *ends, batch=True)


def fit_ladder(
    rungs: Sequence[Rung], *, confidence: float = CONFIDENCE, target: Target | None = None
) -> DataLadder:
    """The laws of every quantity across ``rungs`` (sorted by data size; see the module),
    which answer for ``target``.

    Raises:
        ValueError: fewer than `MIN_RUNGS` rungs, a data size that is not positive or given
            twice, or rungs answered for different accelerator counts.
    """
    if len(rungs) < MIN_RUNGS:
        raise ValueError(f"a ladder needs at least {MIN_RUNGS} studies (got {len(rungs)})")
    for rung in rungs:
        if not (math.isfinite(rung.data_size) and rung.data_size > 0):
            raise ValueError(
                f"study {rung.study!r}: the data size must be a positive number of training "
                f"examples (got {rung.data_size:g})"
            )
    ordered = tuple(sorted(rungs, key=lambda r: r.data_size))
    for a, b in itertools.pairwise(ordered):
        if a.data_size == b.data_size:
            raise ValueError(
                f"studies {a.study!r} and {b.study!r} both trained on {a.data_size:,.0f} "
                "examples; each rung needs a data size of its own"
            )
    accelerators = {r.answers.accelerators for r in ordered}
    if len(accelerators) > 1:
        raise ValueError(
            f"the rungs were answered for different accelerator counts {sorted(accelerators)}"
        )
    laws = {q: fit_data_law(ordered, q, confidence) for q in QUANTITIES}
    return DataLadder(ordered, laws, accelerators.pop(), confidence, target)
