"""Where each trial's true crossing of the target lies on its evaluation grid.

A trial is seen only at its evaluations: it first met the target at ``steps_to_target``, so the
true crossing lies in ``(previous_step, steps_to_target]``, where ``previous_step`` is the
evaluation before. The noise-scale fit uses that bracket (see `crossing_estimate`) instead of
the first hit alone, which would put every batch size up to a whole evaluation interval late.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from study.analysis.measures import trial_key, trial_steps_to_target
from study.analysis.table import STEP, flatten_table
from study.config.target import Target

PREVIOUS_STEP = "previous_step"
"""The column of the evaluation step before a trial's first hit (NaN if never reached)."""


def trial_crossings(df: pd.DataFrame, target: Target) -> pd.DataFrame:
    """`trial_steps_to_target` plus ``previous_step``: the evaluation before the first hit.

    Example: a curve evaluated at steps 0, 10, 20 with ``val_accuracy`` 0.1, 0.5, 0.7 and the
    target ``val_accuracy>=0.6`` gives ``steps_to_target == 20`` and ``previous_step == 10``:
    the crossing lies in (10, 20].
    """
    trials = trial_steps_to_target(df, target)
    flat = flatten_table(df)
    key = trial_key(trials)
    evaluations = flat[[*key, STEP]].merge(trials[[*key, "steps_to_target"]], on=key)
    before = evaluations[evaluations[STEP].astype(float) < evaluations["steps_to_target"]]
    previous = before.groupby(key, sort=False)[STEP].max().rename(PREVIOUS_STEP).reset_index()
    out = trials.merge(previous, on=key, how="left")
    out[PREVIOUS_STEP] = out[PREVIOUS_STEP].astype(float).where(out["reached"], np.nan)
    return out


def crossing_estimate(steps: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """The crossing step to fit: the geometric midpoint of ``(previous, steps]``.

    Where ``previous`` is unknown (None or NaN) or not positive, ``steps`` itself. On a
    geometric grid of ratio r the crossing is then off by at most ``sqrt(r)`` either way
    instead of up to ``r`` late.

    Example: ``crossing_estimate([44.0], [41.0])`` is ``sqrt(41 * 44) = 42.47``.
    """
    steps = np.asarray(steps, dtype=float)
    if previous is None:
        return steps
    previous = np.asarray(previous, dtype=float)
    known = np.isfinite(steps) & np.isfinite(previous) & (previous > 0)
    with np.errstate(invalid="ignore"):
        return np.where(known, np.sqrt(np.where(known, previous, 1.0) * steps), steps)
