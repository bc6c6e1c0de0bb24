"""A study's MLflow runs as a DataFrame, read without touching MLflow's global state (the
tracking URI of the calling process stays as it was)."""

from __future__ import annotations

import pandas as pd


def study_runs(study: str, uri_option: str | None = None) -> pd.DataFrame:
    """The runs of experiment ``study`` (parent and trials), newest first, one row each with
    ``run_id``, ``run_name``, ``status``, ``start_time``, ``end_time`` (UTC timestamps) and
    ``params.*``, ``metrics.*`` (latest values) and ``tags.*`` columns, as
    `mlflow.search_runs` lays them out; empty when the store or the experiment does not exist
    (a local store is not created by asking)."""
    from study.paths import tracking_store_exists, tracking_uri

    if not tracking_store_exists(uri_option):
        return pd.DataFrame()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri(uri_option))
    experiment = client.get_experiment_by_name(study)
    if experiment is None:
        return pd.DataFrame()
    rows, token = [], None
    while True:
        page = client.search_runs(
            [experiment.experiment_id],
            max_results=1000,
            page_token=token,
            order_by=["attributes.start_time DESC"],
        )
        rows += [_row(run) for run in page]
        token = page.token
        if not token:
            return pd.DataFrame(rows)


def _row(run: object) -> dict[str, object]:
    info, data = run.info, run.data  # type: ignore[attr-defined]
    row: dict[str, object] = {
        "run_id": info.run_id,
        "run_name": info.run_name,
        "status": info.status,
        "start_time": _time(info.start_time),
        "end_time": _time(info.end_time),
    }
    row.update({f"params.{k}": v for k, v in data.params.items()})
    row.update({f"metrics.{k}": v for k, v in data.metrics.items()})
    row.update({f"tags.{k}": v for k, v in data.tags.items()})
    return row


def _time(millis: int | None) -> pd.Timestamp:
    return pd.NaT if millis is None else pd.Timestamp(millis, unit="ms", tz="UTC")
