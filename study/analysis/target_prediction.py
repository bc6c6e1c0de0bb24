"""The answer at a target the study did not reach, and the whole reading across targets.

`target_scaling` refits the model of every trial at a grid of levels (`sweep_levels`), fits
the law of B_noise across them (`fit_law`: its form chosen by the data), the critical batch size
in the same form, and, when asked,
predicts both at a harder target with intervals for the answer there (`predict_target`: from the power
law, whichever form the data chose to state, so the exponent's uncertainty is in them), with the
batch size for N accelerators that follows by the answers' rule: the largest ``N * 2^k`` up to
the larger of the predicted critical batch size and the end of perfect scaling (the hardest
level's, in proportion to the predicted B_noise); its interval: the same rule at the ends. The prediction says
what it assumed (`TargetPrediction.assumption`: "for val_accuracy >= 0.7, extrapolated from
0.35-0.6") and how far it reached (in fitted ranges of the law's axis); past `MAX_DISTANCE`
of them, or without a law, it is refused with the reason.

Example::

    scaling = target_scaling(table, Target.parse("val_accuracy>=0.6"), predict=0.7)
    scaling.prediction.critical_batch.text(), scaling.prediction.assumption
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from study.analysis.answers import DEFAULT_ACCELERATORS, OVERHEAD, Answer
from study.analysis.fitting import CONFIDENCE
from study.analysis.target_law import MAX_DISTANCE, Quantity, TargetLaw, fit_law
from study.analysis.target_levels import (
    LEVELS,
    TargetSweep,
    at_level,
    axis_value,
    level_grid,
    sweep_levels,
)
from study.config.target import Target

AUTO: Literal["auto"] = "auto"
"""The levels `level_grid` chooses."""

LAWS: tuple[Quantity, ...] = ("b_noise", "critical_batch")


@dataclass(frozen=True)
class TargetPrediction:
    """The answer at ``target`` from the laws (see the module): ``ok``/``reason``;
    ``distance`` (fitted ranges beyond the levels; 0 inside them); ``fitted`` (the levels'
    thresholds, ``"0.35-0.6"``); ``b_noise``, ``critical_batch`` and ``recommended_batch``
    (`Answer`, intervals for the answer at ``target`` itself: `TargetLaw.predict`; None when
    refused); ``accelerators``."""

    target: Target
    ok: bool
    reason: str = ""
    distance: float = math.nan
    fitted: str = ""
    accelerators: int = DEFAULT_ACCELERATORS
    b_noise: Answer | None = None
    critical_batch: Answer | None = None
    recommended_batch: Answer | None = None

    @property
    def assumption(self) -> str:
        """What the prediction assumed: ``"for val_accuracy >= 0.7, extrapolated from
        0.35-0.6"`` (``"interpolated"`` inside the fitted levels)."""
        t = self.target
        how = "interpolated" if self.distance == 0 else "extrapolated"
        return f"for {t.metric} {t.op} {t.threshold:g}, {how} from {self.fitted or 'no levels'}"

    def line(self) -> str:
        """One line: the assumption and the predicted answers, or the refusal."""
        if not self.ok:
            return f"no prediction {self.assumption.split(',')[0]}: {self.reason}"
        assert self.b_noise and self.critical_batch and self.recommended_batch
        return (
            f"{self.assumption} ({self.distance:.2g} fitted ranges beyond): B_noise "
            f"{self.b_noise.text()}, critical batch size {self.critical_batch.text()}, batch "
            f"size for {self.accelerators} accelerators {self.recommended_batch.text()}"
        )

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "target": str(self.target),
            "ok": self.ok,
            "reason": self.reason,
            "assumption": self.assumption,
            "distance": self.distance if math.isfinite(self.distance) else None,
            "fitted": self.fitted,
            "accelerators": self.accelerators,
        }
        for name in ("b_noise", "critical_batch", "recommended_batch"):
            answer = getattr(self, name)
            out[name] = None if answer is None else answer.to_dict()
        return out


@dataclass(frozen=True)
class TargetScaling:
    """The answers across targets of one study: ``sweep`` (per level), ``laws`` (by
    quantity: ``b_noise``, ``critical_batch``) and ``prediction`` (None when none was
    asked for)."""

    sweep: TargetSweep
    laws: dict[str, TargetLaw] = field(default_factory=dict)
    prediction: TargetPrediction | None = None

    @property
    def law(self) -> TargetLaw:
        """The law of the critical batch size (the recommendation follows it)."""
        return self.laws["critical_batch"]

    def frame(self) -> pd.DataFrame:
        """One row per level (`TargetSweep.frame`)."""
        return self.sweep.frame()


def target_scaling(
    table: pd.DataFrame,
    target: Target,
    levels: Sequence[float] | Literal["auto"] = AUTO,
    *,
    predict: float | None = None,
    accelerators: int = DEFAULT_ACCELERATORS,
    confidence: float = CONFIDENCE,
    overhead: float = OVERHEAD,
    n_levels: int = LEVELS,
) -> TargetScaling:
    """Answers at ``levels`` (``"auto"``: `level_grid`), the laws across them and, with
    ``predict`` (a threshold of ``target``'s metric), the prediction there.

    Raises:
        ValueError: no levels (the metric was never measured), or a bad level.
    """
    grid = level_grid(table, target, n_levels) if levels == AUTO else tuple(levels)
    if not grid:
        raise ValueError(f"no levels of {target.metric} to refit at: the trials never measured it")
    sweep = sweep_levels(
        table, target, grid, accelerators=accelerators, confidence=confidence, overhead=overhead
    )
    noise = fit_law(sweep, "b_noise")
    laws = {
        "b_noise": noise,
        "critical_batch": fit_law(sweep, "critical_batch", noise.kind if noise.ok else None),
    }
    prediction = None if predict is None else predict_target(sweep, laws, predict)
    return TargetScaling(sweep, laws, prediction)


def predict_target(
    sweep: TargetSweep, laws: dict[str, TargetLaw], threshold: float
) -> TargetPrediction:
    """The answer at ``threshold`` of the sweep's metric (see the module); refused, with the
    reason, without a law or past `MAX_DISTANCE` fitted ranges."""
    goal = at_level(sweep.target, threshold)
    common = {"target": goal, "fitted": sweep.range_text(), "accelerators": sweep.accelerators}
    x0 = float(axis_value(sweep.target, threshold))
    law = laws["critical_batch"]
    if not law.ok:
        return TargetPrediction(ok=False, reason=law.reason, **common)
    if not x0 > 0 or not math.isfinite(x0):
        return TargetPrediction(
            ok=False,
            reason=f"the law runs in {sweep.axis}, which is {x0:g} there; it must be above 0",
            **common,
        )
    distance = law.distance(x0)
    if distance > MAX_DISTANCE:
        return TargetPrediction(
            ok=False,
            distance=distance,
            reason=f"it lies {distance:.2g} fitted ranges (in log {sweep.axis}) beyond the "
            f"levels {sweep.range_text()}; the law is trusted up to {MAX_DISTANCE:g}",
            **common,
        )
    critical = _power(sweep, law).predict(x0)
    noise = laws["b_noise"]
    b_noise = _power(sweep, noise).predict(x0) if noise.ok else None
    batch = _batch_answer(critical, _perfect_end(sweep, b_noise), sweep.accelerators)
    return TargetPrediction(
        ok=True,
        distance=distance,
        b_noise=b_noise,
        critical_batch=critical,
        recommended_batch=batch,
        **common,
    )


def _power(sweep: TargetSweep, law: TargetLaw) -> TargetLaw:
    """The power-law fit a prediction uses, whichever form the data chose to state: a
    constant is a power law whose exponent's interval holds 0, and a test that could not tell
    them apart is no evidence of no trend (predicting with the constant, the simulator's
    coverage fell to 0.86 at 0.6 fitted ranges)."""
    return law if law.kind == "power" else fit_law(sweep, law.quantity, "power")


def power_of_two_batch(limit: float, accelerators: int) -> float:
    """The largest ``accelerators * 2^k`` (k >= 0) up to ``limit``, at least ``accelerators``.

    Example: ``power_of_two_batch(300, 8) == 256``; ``power_of_two_batch(5, 8) == 8``.
    """
    if not limit >= accelerators:
        return float(accelerators)
    if math.isinf(limit):
        return math.inf
    return float(accelerators * 2 ** math.floor(math.log2(limit / accelerators) + 1e-12))


def _perfect_end(sweep: TargetSweep, b_noise: Answer | None) -> tuple[float, float, float]:
    """The end of perfect scaling at the predicted target: the hardest answered level's, in
    proportion to B_noise (the curve's shape kept), at the prediction's estimate and ends
    (zeros when unknown)."""
    answered = sweep.answered()
    if b_noise is None or not answered:
        return (0.0, 0.0, 0.0)
    last = answered[-1].answers
    if last.perfect_end is None or last.b_noise is None or not last.b_noise.estimate > 0:
        return (0.0, 0.0, 0.0)
    ratio = last.perfect_end.estimate / last.b_noise.estimate
    return (ratio * b_noise.estimate, ratio * b_noise.low, ratio * b_noise.high)


def _batch_answer(
    critical: Answer, perfect_end: tuple[float, float, float], accelerators: int
) -> Answer:
    """The answers' rule (`study.analysis.answers`): the largest batch up to the larger of the
    critical batch size and the end of perfect scaling, here ``accelerators * 2^k``."""
    limits = zip((critical.estimate, critical.low, critical.high), perfect_end)
    ends = [power_of_two_batch(max(c, p), accelerators) for c, p in limits]
    return Answer(f"batch size for {accelerators} accelerator(s)", *ends, batch=True)


def axis_grid(law: TargetLaw, x0: float | None = None, points: int = 50) -> np.ndarray:
    """Axis values spanning the fitted levels (and ``x0``), for drawing the law."""
    low, high = law.x_range
    if x0 is not None and x0 > 0:
        low, high = min(low, x0), max(high, x0)
    return np.geomspace(low, high, points)
