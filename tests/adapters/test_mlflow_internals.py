"""`study.adapters.mlflow_internals` against the installed MLflow: ``mlflow.store.db.utils``
names its latest schema revision and its table creation as used, and a database made by them
stands at that revision with MLflow's tables."""

from __future__ import annotations

import inspect
from pathlib import Path

import sqlalchemy
from mlflow.store.db import utils as db_utils

from study.adapters import mlflow_internals


def test_the_private_functions_exist_with_the_shape_used() -> None:
    assert list(inspect.signature(db_utils._get_latest_schema_revision).parameters) == []
    assert list(inspect.signature(db_utils._initialize_tables).parameters) == ["engine"]


def test_created_tables_stand_at_the_latest_revision(tmp_path: Path) -> None:
    revision = mlflow_internals.latest_schema_revision()
    assert revision
    url = f"sqlite:///{tmp_path / 'store.db'}"
    mlflow_internals.create_tables(url)
    engine = sqlalchemy.create_engine(url)
    try:
        tables = set(sqlalchemy.inspect(engine).get_table_names())
        with engine.connect() as connection:
            stored = connection.execute(sqlalchemy.text("SELECT version_num FROM alembic_version"))
            assert [row[0] for row in stored] == [revision]
    finally:
        engine.dispose()
    assert {"experiments", "runs", "metrics", "params"} <= tables
