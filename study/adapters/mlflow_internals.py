"""MLflow's private names `study` uses: its SQL store's schema revision and table creation.

Checked at MLflow 3.7 (the oldest ``pyproject.toml`` allows) through 3.17; the contract test is
``tests/adapters/test_mlflow_internals.py``.
"""

from __future__ import annotations


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
