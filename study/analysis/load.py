"""The measurement table of a study, read from its ledger (the Optuna storage).

Every trial's curve is stored with it in the ledger, so the table needs neither MLflow nor
TensorFlow. Trials without a curve (failed, infeasible) get one row at step 0 with no metrics,
so they still show on the feasible-region plot.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from study.analysis.table import (
    BATCH_SIZE,
    COLUMNS,
    EXAMPLES,
    HP_PREFIX,
    LEARNING_RATE,
    REPLICAS,
    STATE,
    STEP,
    STRATEGY,
    STRATUM_TRIAL,
    STUDY,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
    index_table,
)

#: Ledger statuses that are not trials of the study (slots run again, over-budget claims).
_SKIPPED = ("interrupted", "discarded")


def ledger_table(storage: Any, name: str, *, include_running: bool = True) -> pd.DataFrame:
    """All trials of study ``name`` as the standard measurement table (flat, one row per eval).

    ``trial`` numbers run over the whole study in start order; ``stratum_trial`` is the trial's
    number inside its stratum (as in MLflow run names ``b128/default#3``).
    """
    prefix = f"{name}/"
    found = []
    for summary in storage.get_all_studies():
        if not summary.study_name.startswith(prefix):
            continue
        attrs = summary.user_attrs
        for t in storage.get_all_trials(summary._study_id, deepcopy=False):
            status = t.user_attrs.get("status", "running")
            if status in _SKIPPED or (status == "running" and not include_running):
                continue
            found.append(
                (
                    t.datetime_start.timestamp() if t.datetime_start else math.inf,
                    summary.study_name,
                    attrs,
                    t,
                )
            )
    found.sort(key=lambda item: (item[0], item[1], item[3].number))
    rows: list[dict[str, Any]] = []
    for number, (_, stratum_name, attrs, t) in enumerate(found):
        rows.extend(_trial_rows(name, number, stratum_name.removeprefix(prefix), attrs, t))
    columns = [*COLUMNS[:2], STRATUM_TRIAL, *COLUMNS[2:]]
    df = pd.DataFrame(rows)
    for column in columns:
        if column not in df.columns:
            df[column] = pd.Series(dtype=float)
    ordered = columns + sorted(c for c in df.columns if c not in columns)
    return df[ordered].reset_index(drop=True)


def _trial_rows(study: str, number: int, stratum: str, attrs: dict, t: Any) -> list[dict[str, Any]]:
    environment = t.user_attrs.get("environment") or {}
    batch = int(t.user_attrs.get("batch_size", attrs.get("batch_size")))
    base = {
        STUDY: study,
        TRIAL: number,
        STRATUM_TRIAL: t.number,
        BATCH_SIZE: batch,
        STRATEGY: t.user_attrs.get("strategy", attrs.get("strategy", "default")),
        REPLICAS: environment.get(
            "replicas", 1 if t.user_attrs.get("status") != "infeasible" else math.nan
        ),
        TUNER: t.user_attrs.get("tuner", "unknown"),
        STATE: t.user_attrs.get("status", "running"),
        LEARNING_RATE: t.params.get("learning_rate", t.user_attrs.get("learning_rate", math.nan)),
    }
    for key, value in t.params.items():
        if key != "learning_rate":
            base[f"{HP_PREFIX}{key}"] = value
    curve = json.loads(t.user_attrs.get("curve") or "[]")
    if not curve:
        return [{**base, STEP: 0, EXAMPLES: 0, TRAIN_SECONDS: 0.0}]
    out = []
    for row in curve:
        values = {k: (math.nan if v is None else v) for k, v in row.items()}
        values.setdefault(EXAMPLES, values.get(STEP, 0) * batch)
        values.setdefault(TRAIN_SECONDS, math.nan)
        out.append({**base, **values})
    return out


def indexed_ledger_table(storage: Any, name: str) -> pd.DataFrame:
    """`ledger_table` indexed by (batch_size, trial, step)."""
    return index_table(ledger_table(storage, name))
