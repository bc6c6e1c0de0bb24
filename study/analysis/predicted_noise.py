"""The predicted critical batch size: B_simple measured during training, next to the fitted
B_noise.

McCandlish et al. (2018) estimate the gradient noise scale ``B_simple = tr(Sigma) / |G|^2``
cheaply during ordinary training; it equals the noise scale B_noise of
``S(B) = S_min (1 + B_noise / B)`` when the Hessian is a multiple of the identity, and in their
experiments the critical batch size tracks it within an order of magnitude. A study gets a
predicted B_simple from one of two sources:

* ``pilot``: the short pilot run stored with the study (`pilot_prediction`; ``study
  noise-scale``), its estimate at the step it reports;
* ``trials``: the study's own trials that measured it (``noise_scale: true``;
  `trials_prediction`): per trial, the estimate at the evaluation where the target was first
  met, or else its last; per batch size, its best trial; combined as the median over batch
  sizes, with the interval from the lowest to the highest of their intervals (each batch
  size's estimate counted with its own interval, so both the spread between batch sizes and
  each estimate's noise are inside).

`compare` says whether the prediction and the fit agree (their intervals overlap) and by what
factor they differ. Pure functions over plain data and the measurement table: nothing here
reads a ledger.

Example::

    predicted = predict_noise_scale(pilot, table, target)
    agreement = compare(predicted, fit)  # agreement.agree, agreement.ratio
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.measures import target_holds, trial_key
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STEP, STRATEGY, TRIAL, flatten_table
from study.config.target import Target

B_SIMPLE = "noise/b_simple"
"""The measurement-table column of a trial's B_simple estimate (`study.results.NOISE`)."""
B_SIMPLE_LOW = "noise/b_simple_low"
B_SIMPLE_HIGH = "noise/b_simple_high"

PILOT = "pilot"
"""The ``source`` of a prediction read from the study's pilot run."""
TRIALS = "trials"
"""The ``source`` of a prediction combined from the study's trials."""

ORDER_OF_MAGNITUDE = 10.0
"""McCandlish et al. find the critical batch size within this factor of B_simple."""

ESTIMATE_COLUMNS = (
    BATCH_SIZE,
    STRATEGY,
    TRIAL,
    LEARNING_RATE,
    STEP,
    "at_target",
    "b_simple",
    "b_simple_low",
    "b_simple_high",
)
"""The columns of `PredictedNoise.estimates`: one row per estimate that went into it."""


@dataclass(frozen=True)
class PredictedNoise:
    """A predicted B_simple with its interval, and where it came from.

    Fields: ``ok`` and ``reason`` (why there is none); ``source`` (`PILOT` or `TRIALS`);
    ``b_simple`` and ``interval`` ``(low, high)`` (None when the estimator gave none; ``high``
    is ``inf`` when the estimator bounded it only from below);
    ``estimates``: the estimates it combines (`ESTIMATE_COLUMNS`: one row for a pilot, one per
    batch size for trials; ``at_target`` says whether the estimate was taken where the target
    was first met); ``steps_run`` (a pilot's length, else 0); ``target`` (the pilot's target,
    if it said).

    Example: trials at batch sizes 32 and 128 with estimates 90 (80 to 100) and 110 (100 to
    130) give ``b_simple == 100`` and ``interval == (80, 130)``.
    """

    ok: bool
    reason: str = ""
    source: str = ""
    b_simple: float = math.nan
    interval: tuple[float, float] | None = None
    estimates: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(ESTIMATE_COLUMNS)), repr=False
    )
    steps_run: int = 0
    target: str = ""

    @property
    def batch_sizes(self) -> int:
        """How many batch sizes the prediction combines."""
        return int(self.estimates[BATCH_SIZE].nunique()) if len(self.estimates) else 0


@dataclass(frozen=True)
class NoiseAgreement:
    """How the predicted B_simple compares with the fitted B_noise.

    Fields: ``ok`` (both exist) and ``reason``; ``agree`` (their intervals overlap; a missing
    interval counts as its point estimate); ``ratio`` (``B_noise / B_simple``); ``gap`` (when
    they do not overlap: the factor between the nearest ends of the two intervals, else 1);
    ``within_order`` (the two point estimates lie within `ORDER_OF_MAGNITUDE` of each other).

    Example: B_simple 100 (80 to 130) and B_noise 300 (200 to 500) do not agree: ``ratio ==
    3``, ``gap == 200 / 130``, ``within_order`` is True.
    """

    ok: bool
    reason: str = ""
    agree: bool = False
    ratio: float = math.nan
    gap: float = math.nan
    within_order: bool = False


def predict_noise_scale(
    pilot: Mapping[str, Any] | None, table: pd.DataFrame, target: Target
) -> PredictedNoise:
    """The pilot's prediction if the study has a usable pilot, else the trials' (`PILOT`
    first: it was run for this purpose)."""
    if pilot:
        predicted = pilot_prediction(pilot)
        if predicted.ok:
            return predicted
    return trials_prediction(table, target)


def pilot_prediction(pilot: Mapping[str, Any]) -> PredictedNoise:
    """B_simple as the pilot run stored it (keys ``b_simple``, ``b_simple_low``,
    ``b_simple_high``, ``batch_size``, ``strategy``, ``learning_rate``, ``at_step``,
    ``steps_run``, ``target``; missing ones are unknown).

    Not ok when its ``b_simple`` is missing, not finite or not positive.
    """
    value = _number(pilot.get("b_simple"))
    if not (math.isfinite(value) and value > 0):
        return PredictedNoise(
            ok=False, reason=f"the pilot run has no finite B_simple (got {pilot.get('b_simple')})"
        )
    low, high = _bounds(_number(pilot.get("b_simple_low")), _number(pilot.get("b_simple_high")))
    interval = (low, high) if math.isfinite(low) else None
    row = {
        BATCH_SIZE: pilot.get("batch_size"),
        STRATEGY: pilot.get("strategy"),
        TRIAL: None,
        LEARNING_RATE: _number(pilot.get("learning_rate")),
        STEP: pilot.get("at_step"),
        "at_target": None,
        "b_simple": value,
        "b_simple_low": low,
        "b_simple_high": high,
    }
    steps_run = pilot.get("steps_run")
    return PredictedNoise(
        ok=True,
        source=PILOT,
        b_simple=value,
        interval=interval,
        estimates=pd.DataFrame([row], columns=list(ESTIMATE_COLUMNS)),
        steps_run=int(steps_run) if isinstance(steps_run, (int, float)) else 0,
        target=str(pilot.get("target") or ""),
    )


def trials_prediction(table: pd.DataFrame, target: Target) -> PredictedNoise:
    """B_simple combined from the trials that measured it (the table's `B_SIMPLE` column).

    Per trial: the estimate at the first evaluation where ``target`` held, else the last
    finite one (at or before that evaluation if the target was met). Per batch size: the best
    trial (the target met in the fewest steps; ties to the smaller learning rate, then trial;
    if none met it, the trial measured latest in training). Combined: the median over batch
    sizes; interval from the lowest lower end to the highest upper end of their intervals (a
    missing interval, too few steps for one, counts as its point; a lower end without an
    upper one is unbounded above). Not ok when no trial measured a finite B_simple.
    """
    flat = flatten_table(table)
    if B_SIMPLE not in flat.columns:
        return PredictedNoise(ok=False, reason="no trial measured the gradient noise scale")
    values = pd.to_numeric(flat[B_SIMPLE], errors="coerce")
    measured = flat[np.isfinite(values.to_numpy(dtype=float)) & (values > 0).to_numpy()]
    if measured.empty:
        return PredictedNoise(ok=False, reason="no trial measured a finite gradient noise scale")
    key = trial_key(flat)
    per_trial = [
        _trial_estimate(rows, target)
        for _, rows in flat.sort_values([*key, STEP], kind="stable").groupby(key, sort=True)
        if rows.index.isin(measured.index).any()
    ]
    estimates = pd.DataFrame([e for e in per_trial if e is not None])
    ranked = estimates.sort_values(
        ["_missed", "_steps", "_latest", LEARNING_RATE, TRIAL], kind="stable"
    )
    best = ranked.drop_duplicates(subset=[BATCH_SIZE], keep="first").sort_values(BATCH_SIZE)
    best = best[list(ESTIMATE_COLUMNS)].reset_index(drop=True)
    points = best["b_simple"].to_numpy(dtype=float)
    lows = best["b_simple_low"].to_numpy(dtype=float)
    highs = best["b_simple_high"].to_numpy(dtype=float)
    lows, highs = np.where(np.isnan(lows), points, lows), np.where(np.isnan(highs), points, highs)
    one_without = len(best) == 1 and not np.isfinite(best["b_simple_low"].iloc[0])
    return PredictedNoise(
        ok=True,
        source=TRIALS,
        b_simple=float(np.median(points)),
        interval=None if one_without else (float(lows.min()), float(highs.max())),
        estimates=best,
    )


def compare(predicted: PredictedNoise, fit: NoiseScaleFit) -> NoiseAgreement:
    """Whether ``predicted`` B_simple and ``fit``'s B_noise agree (see `NoiseAgreement`)."""
    if not predicted.ok:
        return NoiseAgreement(ok=False, reason=f"no predicted B_simple: {predicted.reason}")
    if not fit.ok:
        return NoiseAgreement(ok=False, reason=f"no fitted B_noise: {fit.reason}")
    simple = predicted.interval or (predicted.b_simple, predicted.b_simple)
    noise = fit.b_noise_ci or (fit.b_noise, fit.b_noise)
    agree = simple[0] <= noise[1] and noise[0] <= simple[1]
    gap = 1.0 if agree else max(noise[0] / simple[1], simple[0] / noise[1])
    ratio = fit.b_noise / predicted.b_simple
    return NoiseAgreement(
        ok=True,
        agree=agree,
        ratio=float(ratio),
        gap=float(gap),
        within_order=max(ratio, 1 / ratio) <= ORDER_OF_MAGNITUDE,
    )


# ------------------------------------------------------------------------------------ pieces


def _trial_estimate(rows: pd.DataFrame, target: Target) -> dict[str, Any] | None:
    """One trial's estimate with the keys it is ranked by (``_missed``, ``_steps``,
    ``_latest``)."""
    value = pd.to_numeric(rows[B_SIMPLE], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(value) & (value > 0)
    held = (
        target_holds(rows[target.metric], target)
        if target.metric in rows
        else np.zeros(len(rows), dtype=bool)
    )
    steps = rows[STEP].to_numpy(dtype=float)
    at_target = False
    if held.any():
        first = int(np.argmax(held))
        usable = np.flatnonzero(finite[: first + 1])
        at_target = bool(finite[first])
    else:
        usable = np.flatnonzero(finite)
    if usable.size == 0:
        return None
    i = usable[-1]
    low, high = _bounds(_column(rows, B_SIMPLE_LOW, i), _column(rows, B_SIMPLE_HIGH, i))
    return {
        BATCH_SIZE: rows[BATCH_SIZE].iloc[0],
        STRATEGY: rows[STRATEGY].iloc[0] if STRATEGY in rows else "",
        TRIAL: rows[TRIAL].iloc[0],
        LEARNING_RATE: float(rows[LEARNING_RATE].iloc[0]),
        STEP: int(steps[i]),
        "at_target": at_target,
        "b_simple": float(value[i]),
        "b_simple_low": low,
        "b_simple_high": high,
        "_missed": not held.any(),
        "_steps": float(steps[int(np.argmax(held))]) if held.any() else math.inf,
        "_latest": -float(steps[i]),
    }


def _bounds(low: float, high: float) -> tuple[float, float]:
    """An estimate's interval as stored: a lower end without an upper one is unbounded above
    (the estimator's resampled |G|^2 reached zero, and infinity is stored as null)."""
    if math.isfinite(low) and not math.isfinite(high):
        return low, math.inf
    return low, high


def _column(rows: pd.DataFrame, column: str, i: int) -> float:
    if column not in rows:
        return math.nan
    value = _number(rows[column].iloc[i])
    return value if math.isfinite(value) and value > 0 else math.nan


def _number(value: Any) -> float:
    """``value`` as a float; NaN for None, text or anything else that is not a number."""
    if isinstance(value, bool) or value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
