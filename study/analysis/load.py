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
    environment = trial.result.environment if trial.result else {}
    batch = trial.stratum.batch_size
    base = {
        STUDY: study,
        TRIAL: number,
        STRATUM_TRIAL: trial.number,
        BATCH_SIZE: batch,
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
    if not curve:
        return [{**base, STEP: 0, EXAMPLES: 0, TRAIN_SECONDS: 0.0}]
    out = []
    for row in curve:
        values = {k: (math.nan if v is None else v) for k, v in row.items()}
        values.setdefault(EXAMPLES, values.get(STEP, 0) * batch)
        values.setdefault(TRAIN_SECONDS, math.nan)
        out.append({**base, **values})
    return out
