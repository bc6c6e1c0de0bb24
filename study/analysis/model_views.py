"""The model of every trial's answers in the shapes the report draws and decides with.

`scaling_answers` gives each answer with its interval; the report also draws the model's S(B)
with a band, shades its regimes, and turns its recommended batch size into a decision with a
wall-time factor. Those views are here, each read off the same fitted model, so a figure, a
table and a sentence can only state the answer the model gives:

* `ModelCurve`: S(B) and E(B) at the best learning rate, with pointwise bands from the model's
  parameter draws (the interface the plots and the time model read);
* `model_regimes`: Shallue et al.'s regime rules (`scaling_regimes`) applied to the model's S(B)
  on the batch sizes that reached the target, the same rule `scaling_answers` reads;
* `model_recommendation`: the model's batch size and learning rate for N accelerators, its
  speed-up in steps, and in wall time with the measured (or ideal) seconds per step.

Example::

    answers = scaling_answers(fit_surrogate(trials), accelerators=8)
    model_curve(answers).predict_steps([64, 128]), model_regimes(answers).perfect_end
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from study.analysis.answers import Answers
from study.analysis.fitting import CONFIDENCE, as_number
from study.analysis.likelihood import LOG_STEPS_MAX, log_best_lr, log_steps_curve
from study.analysis.recommend import Recommendation, time_factor
from study.analysis.regimes import Regimes, per_batch_size, scaling_regimes
from study.analysis.table import BATCH_SIZE

METHOD = "model of every trial"
"""The ``method`` of the model's curve (where the best-trial fit says ``profile likelihood``)."""

BAND_DRAWS = 400
"""Parameter draws behind the curve's pointwise band."""


@dataclass(frozen=True)
class ModelCurve:
    """The model's ``S(B) = S_min (1 + (B_noise/B)^q)^(1/q)`` with its answers' intervals.

    Fields: ``ok``, ``reason``; ``b_noise``, ``s_min``, ``e_min`` and their ``*_ci``; ``knee``
    (``q``); ``confidence``; ``batch_sizes`` (those that reached the target, where the model
    was read); ``method``; ``notes`` (none: the model's notes are the report's). ``theta`` and
    ``draws`` are the estimate and parameter draws behind the band.
    """

    ok: bool
    reason: str = ""
    b_noise: float = math.nan
    s_min: float = math.nan
    e_min: float = math.nan
    b_noise_ci: tuple[float, float] | None = None
    s_min_ci: tuple[float, float] | None = None
    e_min_ci: tuple[float, float] | None = None
    knee: float = math.nan
    confidence: float = CONFIDENCE
    batch_sizes: tuple[int | float, ...] = ()
    method: str = METHOD
    notes: tuple[str, ...] = ()
    theta: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False, compare=False)

    def predict_steps(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``S(B)`` (NaN when not ok)."""
        b = np.asarray(batch_size, dtype=float)
        if not self.ok:
            return np.full(b.shape, np.nan)
        return _steps(self.theta[None, :], b)[0].reshape(b.shape)

    def predict_examples(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``E(B) = B S(B)``."""
        return np.asarray(batch_size, dtype=float) * self.predict_steps(batch_size)

    def speedup(self, base: float, chosen: float) -> float:
        """``S(base) / S(chosen)``."""
        return float(self.predict_steps(base) / self.predict_steps(chosen))

    def steps_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The pointwise interval of ``S(B)`` over the model's parameter draws."""
        if not self.ok or self.draws.size == 0:
            return None
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        tail = (1.0 - (confidence or self.confidence)) / 2.0
        curves = _steps(self.draws, b)
        return np.quantile(curves, tail, axis=0), np.quantile(curves, 1.0 - tail, axis=0)

    def examples_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The pointwise interval of ``E(B) = B S(B)``."""
        band = self.steps_band(batch_size, confidence)
        if band is None:
            return None
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        return b * band[0], b * band[1]


def model_curve(answers: Answers, *, seed: int = 0) -> ModelCurve:
    """The model's S(B) with the intervals of ``answers`` (not ok when they are not)."""
    if not answers.ok or answers.surrogate is None:
        return ModelCurve(ok=False, reason=answers.reason, confidence=answers.confidence)
    model = answers.surrogate
    return ModelCurve(
        ok=True,
        b_noise=answers.b_noise.estimate,
        s_min=answers.s_min.estimate,
        e_min=answers.e_min.estimate,
        b_noise_ci=(answers.b_noise.low, answers.b_noise.high),
        s_min_ci=(answers.s_min.low, answers.s_min.high),
        e_min_ci=(answers.e_min.low, answers.e_min.high),
        knee=model.knee,
        confidence=answers.confidence,
        batch_sizes=tuple(as_number(b) for b in model.reached_batch_sizes),
        theta=model.theta,
        draws=model.draws(BAND_DRAWS, seed),
    )


@dataclass(frozen=True)
class ModelLr:
    """The model's best learning rate ``lr*(B)`` with alpha's interval (the interface
    `plot_best_lr` reads)."""

    ok: bool
    alpha: float = math.nan
    alpha_ci: tuple[float, float] | None = None
    confidence: float = CONFIDENCE
    theta: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    b_ref: float = math.nan

    def predict(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``lr*(B)``."""
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        return np.exp(log_best_lr(self.theta[None, :], b, self.b_ref)[0])


def model_lr(answers: Answers) -> ModelLr:
    """The model's best learning rate with alpha's interval (not ok without an answer)."""
    if not answers.ok or answers.alpha is None:
        return ModelLr(ok=False, confidence=answers.confidence)
    alpha = answers.alpha
    return ModelLr(
        ok=True,
        alpha=alpha.estimate,
        alpha_ci=(alpha.low, alpha.high),
        confidence=answers.confidence,
        theta=answers.surrogate.theta,
        b_ref=answers.surrogate.b_ref,
    )


def model_steps(answers: Answers) -> pd.DataFrame:
    """The model's S(B) on the batch sizes that reached the target, as a steps table."""
    if not answers.ok or answers.surrogate is None:
        return pd.DataFrame({BATCH_SIZE: [], "steps_to_result": []})
    reached = np.asarray(answers.surrogate.reached_batch_sizes, dtype=float)
    return pd.DataFrame(
        {
            BATCH_SIZE: [as_number(b) for b in reached],
            "steps_to_result": answers.surrogate.steps(reached),
        }
    )


def model_regimes(answers: Answers) -> Regimes:
    """The regimes of the model's S(B) (`scaling_regimes` at ``answers.tolerance``): their
    ``perfect_end`` and ``max_parallel_start`` are the answers' estimates."""
    if not answers.ok:
        return Regimes(
            ok=False,
            reason=f"no model of every trial: {answers.reason}",
            tolerance=answers.tolerance,
        )
    return scaling_regimes(model_steps(answers), answers.tolerance)


def model_recommendation(
    answers: Answers, steps: pd.DataFrame, throughput: pd.DataFrame | None = None
) -> Recommendation:
    """The model's batch size and learning rate for ``answers.accelerators`` devices.

    ``steps`` is the measured per-batch-size table (`summarize_trials`): the measured steps and
    the best rate's edge are read there. The wall-time speed-up is the model's step speed-up
    times the ratio of seconds per step (`time_factor`: measured ``throughput`` where it has
    both batch sizes, else ideal hardware).
    """
    accelerators = answers.accelerators
    if not answers.ok:
        return Recommendation(
            ok=False,
            reason=f"the model of every trial has no answer: {answers.reason}",
            accelerators=accelerators,
        )
    if answers.recommended_batch is None:
        measured = ", ".join(f"{b:g}" for b in answers.surrogate.reached_batch_sizes)
        return Recommendation(
            ok=False,
            reason=f"no batch size that reached the target is divisible by {accelerators} "
            f"accelerators (reached: {measured})",
            accelerators=accelerators,
        )
    chosen = answers.recommended_batch.estimate
    base = float(answers.surrogate.reached_batch_sizes[0])
    per = per_batch_size(steps, "steps_to_result").set_index(BATCH_SIZE)
    row = per.loc[chosen] if chosen in per.index else pd.Series(dtype=float)
    measured_steps = float(row.get("steps_to_result", math.nan))
    base_steps = float(per.loc[base, "steps_to_result"]) if base in per.index else math.nan
    speed = answers.step_speedup
    factor, source, strategy, notes = time_factor(throughput, base, chosen, accelerators)
    return Recommendation(
        ok=True,
        accelerators=accelerators,
        batch_size=as_number(chosen),
        per_device_batch=chosen / accelerators,
        learning_rate=answers.recommended_lr.estimate,
        lr_source="model",
        lr_on_edge=bool(row.get("lr_on_edge", False)),
        regime=model_regimes(answers).regime(chosen),
        base_batch_size=as_number(base),
        steps=measured_steps,
        base_steps=base_steps,
        step_speedup=speed.estimate,
        step_speedup_ci=(speed.low, speed.high),
        measured_step_speedup=base_steps / measured_steps,
        time_speedup=speed.estimate * factor,
        time_speedup_ci=(speed.low * factor, speed.high * factor),
        measured_time_speedup=base_steps / measured_steps * factor,
        time_source=source,
        strategy=strategy,
        notes=tuple(notes),
    )


def _steps(thetas: np.ndarray, batch_sizes: np.ndarray) -> np.ndarray:
    return np.exp(np.minimum(log_steps_curve(thetas, batch_sizes.ravel()), LOG_STEPS_MAX))
