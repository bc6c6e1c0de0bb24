"""A trial's metrics written to a SQL tracking store in one insert of many rows.

A trial's curve is hundreds of metric points. MLflow's own ``log_batch`` builds an ORM object
per point in its SQL store (~0.1 ms of CPU each: most of what MLflow costs a study), so when
the client writes straight to a database (the default local ``mlflow.db``) `insert_metrics`
writes the points with one multi-row insert in one transaction and updates the run's latest
values with MLflow's own rule (`study.adapters.mlflow_internals.insert_metric_rows`, given
each key's latest point). The rows are what ``log_batch`` writes (the same columns, duplicates
dropped, NaN and infinities stored as MLflow stores them), so the run reads back the same
(tested). Any other store (a tracking server over HTTP), or anything unexpected, returns False
and the caller logs with ``log_batch``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from study.adapters import mlflow_internals

LOG = logging.getLogger(__name__)


def sql_store(client: MlflowClient) -> Any | None:
    """The client's store when it is MLflow's SQL store (None otherwise)."""
    try:
        return mlflow_internals.sql_tracking_store(client)
    except Exception:  # another MLflow: its own path
        return None


def insert_metrics(client: MlflowClient, run_id: str, metrics: Sequence[Metric]) -> bool:
    """Write ``metrics`` (no model ids) into run ``run_id`` with one insert; whether it did
    (False: nothing was written, log them with ``log_batch``)."""
    store = sql_store(client)
    if store is None or not metrics or any(m.model_id for m in metrics):
        return False
    try:
        from mlflow.store.tracking.dbmodels.models import SqlMetric

        rows, latest = metric_rows(store, run_id, metrics)
        newest = [SqlMetric(**row) for row in latest]
        mlflow_internals.insert_metric_rows(store, run_id, rows, newest)
    except Exception as exc:  # e.g. points of an earlier attempt: log_batch skips those
        LOG.debug("metrics of run %s by log_batch instead (%s)", run_id, exc)
        return False
    return True


def metric_rows(
    store: Any, run_id: str, metrics: Sequence[Metric]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the metrics table ``log_batch`` writes for ``metrics`` into run ``run_id``
    (duplicates dropped; NaN and infinities as the SQL ``store`` keeps them), and each key's
    latest point (MLflow's rule: the greatest step, then timestamp, then value) as a row of
    its latest values."""
    rows: dict[tuple[str, int, int, float, bool], dict[str, Any]] = {}
    latest: dict[str, dict[str, Any]] = {}
    for m in metrics:
        value = m.value
        if math.isfinite(value):
            is_nan = False
        else:  # NaN and infinities as the store keeps them
            is_nan, value = store.sanitize_metric_value(value)
        key, step, stamp = m.key, int(m.step), int(m.timestamp)
        point = (key, stamp, step, value, is_nan)
        row = rows.get(point)
        if row is None:
            row = rows[point] = {
                "run_uuid": run_id,
                "key": key,
                "value": value,
                "timestamp": stamp,
                "step": step,
                "is_nan": is_nan,
            }
        last = latest.get(key)
        if last is None or (step, stamp, value) > (last["step"], last["timestamp"], last["value"]):
            latest[key] = row
    return list(rows.values()), list(latest.values())
