"""MLflow's private names `study` uses: its SQL store's schema revision and table creation, a
client's store, and the SQL store's run check and latest-metrics update.

Checked at MLflow 3.7 (the oldest ``pyproject.toml`` allows) through 3.17; the contract test is
``tests/adapters/test_mlflow_internals.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any


def latest_schema_revision() -> str:
    """The Alembic revision MLflow's SQL store migrations end at.

    Uses ``mlflow.store.db.utils._get_latest_schema_revision``. Fallback: none here; the caller
    (`study.tracking.store_template`) leaves the store for MLflow to create on any error."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return str(_get_latest_schema_revision())


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

    maker = store.ManagedSessionMaker
    writing = "read_only" in inspect.signature(maker).parameters
    with maker(read_only=False) if writing else maker() as session:
        store._check_run_is_active(store._get_run(run_uuid=run_id, session=session))
        session.execute(sqlalchemy.insert(SqlMetric.__table__), list(rows))
        store._update_latest_metrics_if_necessary(list(newest), session)
        session.commit()
