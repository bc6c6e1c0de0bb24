"""The answers as a function of the target: one study's model refitted at every level its
trials' curves crossed.

A study answers for its target, but B_noise and the critical batch size grow as training goes
further (McCandlish et al. 2018; Kaplan et al. 2020 fit ``B_crit(L) ~ B* / L^(1/alpha_B)``).
Every trial's whole validation curve is recorded, so the model of every trial
(`study.analysis.answers.study_answers`) can be refitted at easier levels of the same metric,
with the study's hold rule, without training. `level_grid` picks the levels (evenly spaced in
the metric from the level nearly every trial reached to the study's target), `sweep_levels`
answers at each, and `study.analysis.target_law` fits a law across them and extrapolates.

The law's axis is the distance still to go (`axis_value`): the metric itself for a target that
falls (a loss, an error), ``1 - metric`` for one that rises (an accuracy).

Example::

    levels = level_grid(table, Target.parse("val_accuracy>=0.6"))   # (0.35, 0.4, ..., 0.6)
    sweep = sweep_levels(table, target, levels, accelerators=8)
    sweep.frame()[["threshold", "b_noise", "b_noise_low", "b_noise_high"]]
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.analysis.answers import (
    ANSWER_NAMES,
    DEFAULT_ACCELERATORS,
    OVERHEAD,
    Answers,
    scaling_answers,
)
from study.analysis.crossings import trial_crossings
from study.analysis.fitting import CONFIDENCE
from study.analysis.surrogate import censored_trials, fit_surrogate
from study.analysis.table import STEP, TRIAL, flatten_table
from study.analysis.threads import one_blas_thread
from study.config.target import Target

LEVELS = 6
"""Levels `level_grid` gives by default, the study's target included."""

REACHED_BY = 0.9
"""The easiest level of `level_grid`: the one this share of the trials reached."""

START_SHARE = 0.2
"""The easiest level lies at least this share of the way from where the trials started (their
median first evaluation) to the target: below it every trial crosses in its first steps."""

SPAN_SHARE = 0.5
"""The easiest level lies at most this share of the way from where the trials started to the
target: the levels span at least the rest, enough for a law."""

QUANTITIES = ("b_noise", "critical_batch", "alpha", "recommended_batch", "recommended_lr")
"""The answers `TargetSweep.frame` shows per level (each with ``_low`` and ``_high``)."""


def axis_value(target: Target, threshold: float | np.ndarray) -> np.ndarray:
    """The law's axis at ``threshold``: the distance still to go, ``threshold`` for a falling
    metric (loss, error), ``1 - threshold`` for a rising one (accuracy).

    Example: ``axis_value(Target.parse("val_accuracy>=0.6"), 0.7) == 0.3``.
    """
    value = np.asarray(threshold, dtype=float)
    return 1.0 - value if target.maximize else value


def axis_name(target: Target) -> str:
    """``"1 - val_accuracy"`` for a rising metric, ``"val_loss"`` for a falling one."""
    return f"1 - {target.metric}" if target.maximize else target.metric


def at_level(target: Target, threshold: float) -> Target:
    """``target`` with another threshold, its metric, direction and hold rule kept."""
    return dataclasses.replace(target, threshold=float(threshold))


def level_grid(table: pd.DataFrame, target: Target, n: int = LEVELS) -> tuple[float, ...]:
    """``n`` levels evenly spaced in the metric, from the level `REACHED_BY` of the trials
    reached (their best value), kept between `START_SHARE` and `SPAN_SHARE` of the way from
    their median first evaluation to the study's target, to the target, rounded to 3
    significant digits (the last is the target's threshold itself). Empty when no trial measured the metric.

    Raises:
        ValueError: if ``n < 2``.
    """
    if n < 2:
        raise ValueError(f"n must be >= 2 levels (got {n})")
    flat = flatten_table(table)
    if target.metric not in flat.columns or flat.empty:
        return ()
    values = flat[[TRIAL, STEP, target.metric]].dropna().sort_values([TRIAL, STEP])
    if values.empty:
        return ()
    sign = 1.0 if target.maximize else -1.0
    by_trial = values.groupby(TRIAL)[target.metric]
    best = sign * by_trial.max() if target.maximize else sign * by_trial.min()
    start = sign * float(by_trial.first().median())
    goal = sign * target.threshold
    if not start < goal:
        return (target.threshold,)
    easy = float(np.quantile(best.to_numpy(dtype=float), 1.0 - REACHED_BY))
    easy = min(max(easy, start + START_SHARE * (goal - start)), start + SPAN_SHARE * (goal - start))
    grid = sign * np.linspace(easy, goal, n)
    return (*(float(f"{x:.3g}") for x in grid[:-1]), target.threshold)


@dataclass(frozen=True)
class Level:
    """One level's answers: ``target`` (the study's, at this threshold), ``answers`` (the
    model of every trial refitted there) and ``reached`` (the trials that reached it)."""

    target: Target
    answers: Answers
    reached: int

    @property
    def threshold(self) -> float:
        return self.target.threshold

    @property
    def ok(self) -> bool:
        return self.answers.ok


@dataclass(frozen=True)
class TargetSweep:
    """The answers at every level of one study (`sweep_levels`): ``target`` (the study's),
    ``levels`` (easiest first), ``accelerators``, ``confidence``, ``overhead``."""

    target: Target
    levels: tuple[Level, ...]
    accelerators: int
    confidence: float
    overhead: float

    @property
    def axis(self) -> str:
        """The law's axis, e.g. ``"1 - val_accuracy"`` (`axis_name`)."""
        return axis_name(self.target)

    def answered(self) -> tuple[Level, ...]:
        """The levels whose model gave answers."""
        return tuple(level for level in self.levels if level.ok)

    def range_text(self) -> str:
        """The thresholds with answers, ``"0.35-0.6"`` (``""`` when none)."""
        answered = self.answered()
        if not answered:
            return ""
        ends = sorted({answered[0].threshold, answered[-1].threshold})
        return "-".join(f"{x:g}" for x in ends)

    def frame(self) -> pd.DataFrame:
        """One row per level: ``threshold``, ``axis`` (`axis_value`), ``trials_reached``,
        ``ok``, ``reason`` and each of `QUANTITIES` with ``_low`` and ``_high`` (NaN where
        the model has no answer)."""
        rows = []
        for level in self.levels:
            row: dict[str, object] = {
                "threshold": level.threshold,
                "axis": float(axis_value(self.target, level.threshold)),
                "trials_reached": level.reached,
                "ok": level.ok,
                "reason": level.answers.reason,
            }
            for name in QUANTITIES:
                answer = getattr(level.answers, name)
                for suffix, field in (("", "estimate"), ("_low", "low"), ("_high", "high")):
                    row[name + suffix] = math.nan if answer is None else getattr(answer, field)
            rows.append(row)
        return pd.DataFrame(rows)

    def answers_frame(self, threshold: float) -> pd.DataFrame:
        """One level's answers, one row each: ``answer``, ``name``, ``estimate``, ``low``,
        ``high``, ``batch``.

        Raises:
            KeyError: no level at ``threshold``.
        """
        for level in self.levels:
            if math.isclose(level.threshold, threshold, rel_tol=1e-9, abs_tol=1e-12):
                return pd.DataFrame(
                    [
                        {"answer": key, **dataclasses.asdict(a)}
                        for key, a in zip(_answer_keys(level.answers), level.answers.items())
                    ],
                    columns=["answer", "name", "estimate", "low", "high", "batch"],
                )
        shown = ", ".join(f"{level.threshold:g}" for level in self.levels)
        raise KeyError(f"no level at {threshold:g} (levels: {shown})")


@one_blas_thread
def sweep_levels(
    table: pd.DataFrame,
    target: Target,
    levels: Sequence[float],
    *,
    accelerators: int = DEFAULT_ACCELERATORS,
    confidence: float = CONFIDENCE,
    overhead: float = OVERHEAD,
) -> TargetSweep:
    """The model of every trial at each of ``levels`` (thresholds of ``target``'s metric, its
    direction and hold rule kept), easiest first, as `study_answers` reads it:
    `trial_crossings`, `censored_trials`, `fit_surrogate`, `scaling_answers`.

    Raises:
        ValueError: if ``levels`` is empty or holds a non-finite number.
    """
    if not levels or not all(math.isfinite(float(x)) for x in levels):
        raise ValueError(f"levels must be finite thresholds, at least one (got {list(levels)})")
    sign = 1.0 if target.maximize else -1.0
    ordered = sorted({float(x) for x in levels}, key=lambda x: sign * x)
    flat = flatten_table(table)
    out = []
    for threshold in ordered:
        goal = at_level(target, threshold)
        trials = trial_crossings(flat, goal)
        answers = scaling_answers(
            fit_surrogate(censored_trials(trials, flat)),
            accelerators=accelerators,
            confidence=confidence,
            overhead=overhead,
        )
        out.append(Level(goal, answers, int(trials["reached"].sum()) if len(trials) else 0))
    return TargetSweep(target, tuple(out), accelerators, confidence, overhead)


def _answer_keys(answers: Answers) -> list[str]:
    return [n for n in ANSWER_NAMES if getattr(answers, n) is not None]
