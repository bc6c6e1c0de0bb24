"""The measurement table of a study, built from its ledger records.

Every trial's curve is stored with it in the ledger, so the table needs neither MLflow nor
TensorFlow. Trials without a curve (failed, infeasible) get one row at step 0 with no metrics,
so they still show on the feasible-region plot. The ledger itself is read by the caller
(`study.ledger.Ledger.measurement_rows`); this module only shapes rows into the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from study.analysis.table import (
    BATCH_SIZE,
    COLUMNS,
    EXAMPLES,
    HP_PREFIX,
    LEARNING_RATE,
    ORIGIN,
    REPLICAS,
    SEED,
    STATE,
    STEP,
    STRATEGY,
    STRATUM_TRIAL,
    STUDY,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
)
from study.ledger.records import LedgerTrial
from study.results import TrialState


def ledger_table(
    study: str, trials: Sequence[tuple[LedgerTrial, Sequence[Mapping[str, Any]]]]
) -> pd.DataFrame:
    """The standard measurement table (flat, one row per evaluation) of ``trials``: each trial
    with its stored measurement rows, in start order (as `Ledger.measurement_rows` gives them).

    ``trial`` numbers run over the whole study in that order; ``stratum_trial`` is the trial's
    number inside its stratum (as in MLflow run names ``b128/default#3``); ``seed`` is the seed
    of a trial run under another seed than the study's (a confirmation trial; NaN otherwise)
    and ``origin`` how its point was chosen.
    """
    rows: list[dict[str, Any]] = []
    for number, (trial, curve) in enumerate(trials):
        rows.extend(_trial_rows(study, number, trial, curve))
    columns = [*COLUMNS[:2], STRATUM_TRIAL, *COLUMNS[2:], SEED, ORIGIN]
    df = pd.DataFrame(rows)
    for column in columns:
        if column not in df.columns:
            df[column] = pd.Series(dtype=float)
    ordered = columns + sorted(c for c in df.columns if c not in columns)
    return df[ordered].reset_index(drop=True)


#: The per-trial columns `trials_frame` adds after the trial's identity and parameters.
TRIAL_COLUMNS = (
    "steps_to_target", "examples_to_target", "seconds_to_target", "steps_run",
    "examples_run", "train_seconds", "wall_seconds", "fell_back", "started", "finished",
    "owner", "error_kind", "error",
)  # fmt: skip


def trials_frame(study: str, trials: Sequence[LedgerTrial]) -> pd.DataFrame:
    """One row per trial of ``trials`` (in start order, as `Ledger.measurement_rows` gives
    them), numbered as `ledger_table` numbers them: its identity (``trial``,
    ``stratum_trial``, batch size, strategy, replicas, tuner, origin), its parameters
    (``learning_rate`` and ``hp.*``), ``state``, ``seed`` (the training seed it ran under, NaN
    if not recorded) and `TRIAL_COLUMNS`: steps, examples and training seconds to the target
    (NaN unless reached) and run, the wall seconds the worker spent on it, how many crossings
    fell back before the target held, when it started and finished (UTC timestamps), the
    process that ran it, and the kind and first line of an error."""
    rows = []
    for number, trial in enumerate(trials):
        row = _identity(study, number, trial)
        result = trial.result
        reached = trial.status is TrialState.REACHED and result is not None
        row.update(
            {
                "steps_to_target": _number(result.steps_to_target if reached else None),
                "examples_to_target": _number(result.examples_to_target if reached else None),
                "seconds_to_target": _number(result.seconds_to_target if reached else None),
                "steps_run": _number(result.steps_run if result else None),
                "examples_run": _number(result.examples_run if result else None),
                "train_seconds": _number(result.train_seconds if result else None),
                "wall_seconds": _number(result.timings.get("wall") if result else None),
                "fell_back": len(result.fell_back) if result else 0,
                "started": _time(trial.started_at),
                "finished": _time(trial.finished_at),
                "owner": trial.owner or "",
                "error_kind": result.error_kind.value if result and result.error_kind else "",
                "error": result.error.strip().splitlines()[0] if result and result.error else "",
            }
        )
        rows.append(row)
    identity = [*COLUMNS[:2], STRATUM_TRIAL, *COLUMNS[2:8], SEED, ORIGIN]
    df = pd.DataFrame(rows, columns=None if rows else [*identity, *TRIAL_COLUMNS])
    params = sorted(c for c in df.columns if c.startswith(HP_PREFIX))
    return df[[*identity, *params, *TRIAL_COLUMNS]].reset_index(drop=True)


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _time(seconds: float | None) -> pd.Timestamp:
    return pd.NaT if seconds is None else pd.Timestamp(seconds, unit="s", tz="UTC")


def _seed(trial: LedgerTrial) -> float:
    """The training seed a trial ran under: its ``seed`` extra (a confirmation), else the seed
    its trainer recorded (`TrainingSeeds`), else NaN (a record from before: the study's seed)."""
    seed = trial.extras.get(SEED)
    if seed is None and trial.result is not None:
        seed = trial.result.environment.get("seed")
    return (
        float(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else math.nan
    )


def _trial_rows(
    study: str, number: int, trial: LedgerTrial, curve: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    batch = trial.stratum.batch_size
    base = _identity(study, number, trial)
    if not curve:
        return [{**base, STEP: 0, EXAMPLES: 0, TRAIN_SECONDS: 0.0}]
    out = []
    for row in curve:
        values = {k: (math.nan if v is None else v) for k, v in row.items()}
        values.setdefault(EXAMPLES, values.get(STEP, 0) * batch)
        values.setdefault(TRAIN_SECONDS, math.nan)
        out.append({**base, **values})
    return out


def _identity(study: str, number: int, trial: LedgerTrial) -> dict[str, Any]:
    """A trial's columns shared by the measurement table and `trials_frame`."""
    environment = trial.result.environment if trial.result else {}
    base = {
        STUDY: study,
        TRIAL: number,
        STRATUM_TRIAL: trial.number,
        BATCH_SIZE: trial.stratum.batch_size,
        STRATEGY: trial.stratum.strategy,
        REPLICAS: environment.get(
            "replicas", math.nan if trial.status is TrialState.INFEASIBLE else 1
        ),
        TUNER: trial.tuner or "unknown",
        STATE: trial.status.value,
        LEARNING_RATE: trial.learning_rate,
        SEED: _seed(trial),
        ORIGIN: trial.origin or "",
    }
    for key, value in trial.params.items():
        if key != LEARNING_RATE:
            base[f"{HP_PREFIX}{key}"] = value
    return base
