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
from dataclasses import dataclass, field

import pandas as pd

from study.analysis.answers import Answer
from study.analysis.data_law import (
    MIN_RUNGS,
    NAMES,
    QUANTITIES,
    DataLaw,
    Rung,
    fit_data_law,
)
from study.analysis.fitting import CONFIDENCE
from study.analysis.target_law import MAX_DISTANCE
from study.analysis.target_prediction import power_of_two_batch
from study.config.target import Target

#: A predicted critical batch size whose interval spans more than this factor (two decades:
#: more than six doublings of the batch size, the whole of a grid of 16-1024) cannot choose a
#: batch size: the prediction says so, and which rung would narrow it most.
WIDE = 100.0


@dataclass(frozen=True)
class LadderPrediction:
    """The answers at ``data_size`` from the laws (see the module): ``ok``/``reason``;
    ``distance`` (fitted ranges of ``log D`` beyond the rungs; 0 inside them); ``fitted``
    (the rungs' sizes, ``"5,000-20,000"``); ``largest`` (the largest rung's size);
    ``b_noise``, ``critical_batch``, ``recommended_batch``, ``recommended_lr`` (`Answer`,
    intervals for the answer at that size itself; None when refused or without a law); ``accelerators``;
    ``caution``: why the prediction is too wide to act on and which rung would narrow it most
    ("" when it is not: `WIDE`)."""

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
    caution: str = ""

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
        caution = f". Too wide to act on: {self.caution}" if self.caution else ""
        return f"{self.assumption}: " + ", ".join(shown) + caution

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "data_size": self.data_size,
            "ok": self.ok,
            "reason": self.reason,
            "caution": self.caution,
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
            caution=self._caution(law, critical, data_size),
            **common,
        )

    def _caution(self, law: DataLaw, critical: Answer, data_size: float) -> str:
        """Why the critical batch size predicted at ``data_size`` is too wide to act on (its
        interval spans more than `WIDE`), naming the rung that carries most of its variance
        (`DataLaw.shares`); "" when it is not."""
        span = critical.high / critical.low if critical.low > 0 else math.inf
        if span <= WIDE:
            return ""
        shares = law.shares(data_size)
        size, share = max(zip(law.sizes, shares), key=lambda pair: pair[1])
        rung = next(r for r in self.rungs if r.data_size == size)
        own = rung.answers.critical_batch
        interval = "" if own is None else f", its own {own.low:.3g}-{own.high:.3g}"
        return (
            f"the critical batch size's interval spans a factor of {span:,.0f}; {share:.0%} of "
            f"its variance comes from rung {rung.study!r} ({size:,.0f} examples{interval}): "
            "more trials there, or a rung nearer the size predicted, narrow it most"
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
