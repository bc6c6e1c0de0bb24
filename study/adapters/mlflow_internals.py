"""MLflow's private names `study` uses: its SQL store's schema revision (and the migration
scripts' folder, fingerprinted) and table creation, a
client's store, the SQL store's run check and latest-metrics update, its tables (to write whole
finished runs in one transaction) and its batch validation.

Checked at MLflow 3.7 (the oldest ``pyproject.toml`` allows) through 3.17; the contract test is
``tests/adapters/test_mlflow_internals.py``.
"""

from __future__ import annotations

import hashlib
import inspect
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def latest_schema_revision() -> str:
    """The Alembic revision MLflow's SQL store migrations end at.

    Uses ``mlflow.store.db.utils._get_latest_schema_revision``. Fallback: none here; the caller
    (`study.tracking.store_template`) leaves the store for MLflow to create on any error."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


def migrations_fingerprint() -> str | None:
    """A fingerprint of MLflow's schema migrations (each script's name and size): the same
    while `latest_schema_revision` is, without loading them (Alembic reads every script).

    Uses the layout ``mlflow/store/db_migrations/versions/*.py``. Fallback: None where that
    folder is missing (the caller then asks `latest_schema_revision`)."""
    import mlflow

    folder = Path(mlflow.__file__).parent / "store" / "db_migrations" / "versions"
    scripts = sorted(folder.glob("*.py")) if folder.is_dir() else []
    if not scripts:
        return None
    digest = hashlib.sha256()
    for script in scripts:
        digest.update(f"{script.name}:{script.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def import_sql_store() -> None:
    """Import MLflow's SQL tracking store (SQLAlchemy and MLflow's table models: about a
    second), as `mlflow.MlflowClient` does on its first use of a database URI.

    Uses the module ``mlflow.store.tracking.sqlalchemy_store``. Fallback: none here; the caller
    (`study.tracking.mlflow_logger.warm_soon`) ignores any error, and the client imports it."""
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401


def create_tables(url: str) -> None:
    """Create MLflow's tracking tables in the empty database ``url`` and run every migration,
    as MLflow does when it opens a new SQL store.

    Uses ``mlflow.store.db.utils._initialize_tables`` (with the public
    ``create_sqlalchemy_engine``). Fallback: none here; see `latest_schema_revision`."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine

    engine = create_sqlalchemy_engine(url)
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()


def sql_tracking_store(client: Any) -> Any | None:
    """The `mlflow.MlflowClient` ``client``'s store when it is MLflow's SQL store
    (``SqlAlchemyStore``), else None.

    Uses ``MlflowClient._tracking_client.store``. Fallback: None when it has moved (the caller
    then logs through the public ``log_batch``)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    try:
        store = client._tracking_client.store
    except AttributeError:
        return None
    return store if isinstance(store, SqlAlchemyStore) else None


def insert_metric_rows(
    store: Any, run_id: str, rows: Sequence[dict[str, Any]], newest: Sequence[Any]
) -> None:
    """In one transaction of the SQL ``store``: check that run ``run_id`` is active, insert
    ``rows`` (dicts of ``SqlMetric``'s columns) into the metrics table, and update the run's
    latest metrics with ``newest`` (one ``SqlMetric`` per key: its latest point).

    Uses ``SqlAlchemyStore._get_run``, ``_check_run_is_active`` and
    ``_update_latest_metrics_if_necessary`` (with the public ``ManagedSessionMaker``, asked
    for a writing session where it takes ``read_only``: newer MLflows default to reading;
    MLflow 3.9's takes no argument).
    Fallback: none here; the caller (`study.tracking.metric_rows`) logs with ``log_batch`` on
    any error, before anything is committed."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlMetric

    with _writing(store) as session:
        store._check_run_is_active(store._get_run(run_uuid=run_id, session=session))
        session.execute(sqlalchemy.insert(SqlMetric.__table__), list(rows))
        store._update_latest_metrics_if_necessary(list(newest), session)
        session.commit()


def _writing(store: Any) -> Any:
    """A writing session of the SQL ``store`` (its public ``ManagedSessionMaker``, asked for
    writing where it takes ``read_only``: newer MLflows default to reading)."""
    maker = store.ManagedSessionMaker
    writing = "read_only" in inspect.signature(maker).parameters
    return maker(read_only=False) if writing else maker()


def validated(params: Sequence[Any], tags: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """``params`` and ``tags`` (`Param`, `RunTag`) as ``log_batch`` stores them (values cut to
    MLflow's lengths); raises MLflow's error where ``log_batch`` would refuse them.

    Uses ``mlflow.utils.validation._validate_batch_log_data``. Fallback: none here; the caller
    (`study.tracking.run_rows`) logs with the public calls on any error."""
    from mlflow.utils.validation import _validate_batch_log_data

    _, good_params, good_tags = _validate_batch_log_data([], list(params), list(tags))
    return list(good_params), list(good_tags)


def insert_runs(store: Any, experiment_id: str, runs: Sequence[Mapping[str, Any]]) -> None:
    """In one transaction of the SQL ``store``: each of ``runs``, a finished run of the active
    experiment ``experiment_id``, with its tags, params, metrics and dataset inputs, as
    ``create_run``, ``log_batch``, ``log_inputs`` and ``set_terminated`` would leave it.

    A run is a mapping: ``run_id``, ``name``, ``user_id``, ``status``, ``start_time``,
    ``end_time`` (ms), ``tags`` and ``params`` (`RunTag`, `Param`), ``metrics`` and ``latest``
    (dicts of ``SqlMetric``'s columns: every point, and each key's latest point) and
    ``datasets`` (`DatasetInput`).

    Uses the SQL models' tables ``SqlRun``, ``SqlTag``, ``SqlParam``, ``SqlMetric``,
    ``SqlLatestMetric``, ``SqlDataset``, ``SqlInput``, ``SqlInputTag`` and ``SqlExperiment``
    (the columns ``SqlAlchemyStore.create_run`` and ``_log_inputs_impl`` fill) with the public
    ``ManagedSessionMaker`` and ``mlflow.utils.uri.append_to_uri_path``. Fallback: none here;
    the caller (`study.tracking.run_rows`) logs with the public calls on any error, before
    anything is committed."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels import models
    from mlflow.utils.uri import append_to_uri_path

    experiment = int(experiment_id)
    table = models.SqlExperiment.__table__
    with _writing(store) as session:
        found = session.execute(
            sqlalchemy.select(table.c.lifecycle_stage, table.c.artifact_location).where(
                table.c.experiment_id == experiment
            )
        ).all()
        if len(found) != 1 or found[0][0] != "active":
            raise ValueError(f"experiment {experiment_id} is not active")
        location = found[0][1]
        datasets = _dataset_uuids(session, experiment, runs)
        rows: dict[str, list[dict[str, Any]]] = {
            name: [] for name in ("runs", "tags", "params", "metrics", "latest", "inputs", "itags")
        }
        for run in runs:
            run_id = run["run_id"]
            rows["runs"].append(
                {
                    "run_uuid": run_id,
                    "name": run["name"],
                    "artifact_uri": append_to_uri_path(location, run_id, "artifacts"),
                    "experiment_id": experiment,
                    "source_type": "UNKNOWN",
                    "source_name": "",
                    "entry_point_name": "",
                    "user_id": run["user_id"],
                    "status": run["status"],
                    "start_time": run["start_time"],
                    "end_time": run["end_time"],
                    "deleted_time": None,
                    "source_version": "",
                    "lifecycle_stage": "active",
                }
            )
            rows["tags"] += [
                {"run_uuid": run_id, "key": t.key, "value": t.value} for t in run["tags"]
            ]
            rows["params"] += [
                {"run_uuid": run_id, "key": p.key, "value": p.value} for p in run["params"]
            ]
            rows["metrics"] += run["metrics"]
            rows["latest"] += run["latest"]
            for data in run["datasets"]:
                input_uuid = uuid.uuid4().hex
                rows["inputs"].append(
                    {
                        "input_uuid": input_uuid,
                        "source_type": "DATASET",
                        "source_id": datasets[(data.dataset.name, data.dataset.digest)],
                        "destination_type": "RUN",
                        "destination_id": run_id,
                    }
                )
                rows["itags"] += [
                    {"input_uuid": input_uuid, "name": t.key, "value": t.value} for t in data.tags
                ]
        tables = {
            "runs": models.SqlRun,
            "tags": models.SqlTag,
            "params": models.SqlParam,
            "metrics": models.SqlMetric,
            "latest": models.SqlLatestMetric,
            "inputs": models.SqlInput,
            "itags": models.SqlInputTag,
        }
        for name, model in tables.items():
            if rows[name]:
                session.execute(sqlalchemy.insert(model.__table__), rows[name])
        session.commit()


def _dataset_uuids(
    session: Any, experiment: int, runs: Sequence[Mapping[str, Any]]
) -> dict[tuple[str, str], str]:
    """The uuid of each dataset ``runs`` name in ``experiment``; one not stored yet is inserted
    (as ``SqlAlchemyStore._log_inputs_impl`` does)."""
    import sqlalchemy
    from mlflow.store.tracking.dbmodels.models import SqlDataset

    wanted = {(d.dataset.name, d.dataset.digest): d.dataset for r in runs for d in r["datasets"]}
    if not wanted:
        return {}
    table = SqlDataset.__table__
    stored = session.execute(
        sqlalchemy.select(table.c.name, table.c.digest, table.c.dataset_uuid).where(
            table.c.experiment_id == experiment,
            table.c.name.in_([k[0] for k in wanted]),
            table.c.digest.in_([k[1] for k in wanted]),
        )
    ).all()
    uuids = {(name, digest): uid for name, digest, uid in stored}
    new = []
    for key, dataset in wanted.items():
        if key not in uuids:
            uuids[key] = uuid.uuid4().hex
            new.append(
                {
                    "dataset_uuid": uuids[key],
                    "experiment_id": experiment,
                    "name": dataset.name,
                    "digest": dataset.digest,
                    "dataset_source_type": dataset.source_type,
                    "dataset_source": dataset.source,
                    "dataset_schema": dataset.schema,
                    "dataset_profile": dataset.profile,
                }
            )
    if new:
        session.execute(sqlalchemy.insert(table), new)
    return uuids
