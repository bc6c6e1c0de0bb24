"""Finished runs written whole to a SQL tracking store, several in one transaction.

MLflow's public calls for one finished trial (``create_run``, ``log_batch``, ``log_inputs``,
``set_terminated``) each open a session, read the run back through the ORM and commit: ~25
CPU-ms a trial, most of what MLflow cost a study of short trials. When the client writes
straight to a database (the default local ``mlflow.db``) and the trial's run does not exist
yet, `insert_runs` writes the run with its tags, params, every metric point, its latest
values and its dataset input in one transaction (`study.adapters.mlflow_internals.insert_runs`),
with the values MLflow's own calls would store: params and tags validated and cut as
``log_batch`` does them, metric rows as `study.tracking.metric_rows` makes them, the dataset
looked up or added as ``log_inputs`` does (tested against the public calls). Any other store
(a tracking server over HTTP), or anything unexpected, returns None with nothing written, and
the caller logs with the public calls.

Example: 2 trials of 500 metric points each are one transaction of 2 runs, ~25 tags, ~50
params, 1,000 metric rows, ~40 latest values and 2 inputs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mlflow.entities import DatasetInput, Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from study.adapters import mlflow_internals
from study.tracking.metric_rows import metric_rows, sql_store

LOG = logging.getLogger(__name__)

#: The tag naming a run's user; MLflow's ``create_run`` stores its value as the run's user.
USER_TAG = "mlflow.user"


@dataclass(frozen=True)
class NewRun:
    """A finished run to create: its name, start and end (ms since the epoch), MLflow status
    (``FINISHED``, ``FAILED``, ``KILLED``), every tag (``mlflow.runName`` and
    ``mlflow.parentRunId`` included), params, metric points and dataset inputs."""

    name: str
    start_ms: int
    end_ms: int
    status: str
    tags: Mapping[str, str]
    params: Sequence[Param]
    metrics: Sequence[Metric]
    datasets: Sequence[DatasetInput] = ()


def insert_runs(
    client: MlflowClient, experiment_id: str, runs: Sequence[NewRun]
) -> list[str] | None:
    """Create ``runs`` in experiment ``experiment_id`` in one transaction; their run ids, or
    None when nothing was written (not a SQL store, or anything unexpected: log them with the
    public calls)."""
    store = sql_store(client)
    if store is None or not runs or any(m.model_id for r in runs for m in r.metrics):
        return None
    try:
        records = []
        for run in runs:
            run_id = uuid.uuid4().hex
            tags = [RunTag(k, v) for k, v in run.tags.items()]
            params, tags = mlflow_internals.validated(run.params, tags)
            rows, latest = metric_rows(store, run_id, run.metrics)
            records.append(
                {
                    "run_id": run_id,
                    "name": run.name,
                    "user_id": run.tags.get(USER_TAG, "unknown"),
                    "status": run.status,
                    "start_time": run.start_ms,
                    "end_time": run.end_ms,
                    "tags": tags,
                    "params": params,
                    "metrics": rows,
                    "latest": latest,
                    "datasets": list(run.datasets),
                }
            )
        mlflow_internals.insert_runs(store, experiment_id, records)
    except Exception as exc:  # e.g. a value MLflow refuses: the public calls say why
        LOG.debug("runs by the public calls instead (%s)", exc)
        return None
    return [r["run_id"] for r in records]
