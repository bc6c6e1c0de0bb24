"""`study.adapters.mlflow_internals` against the installed MLflow: ``mlflow.store.db.utils``
names its latest schema revision and its table creation as used, and a database made by them
stands at that revision with MLflow's tables."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import sqlalchemy
from mlflow.store.db import utils as db_utils

from study.adapters import mlflow_internals


def test_the_private_functions_exist_with_the_shape_used() -> None:
    assert list(inspect.signature(db_utils._get_latest_schema_revision).parameters) == []
    assert list(inspect.signature(db_utils._initialize_tables).parameters) == ["engine"]


def test_the_migrations_are_scripts_whose_last_is_the_head() -> None:
    """The fingerprinted folder holds the scripts Alembic reads, one of them the head."""
    fingerprint = mlflow_internals.migrations_fingerprint()
    assert fingerprint is not None and len(fingerprint) == 16
    assert mlflow_internals.migrations_fingerprint() == fingerprint
    folder = Path(db_utils.__file__).parents[1] / "db_migrations" / "versions"
    head = mlflow_internals.latest_schema_revision()
    assert any(head in script.read_text() for script in folder.glob("*.py"))


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


def test_a_clients_sql_store_takes_metric_rows_as_log_batch_would(tmp_path: Path) -> None:
    from mlflow.store.tracking.dbmodels.models import SqlMetric
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking import MlflowClient

    for name in ("_get_run", "_check_run_is_active", "_update_latest_metrics_if_necessary"):
        assert callable(getattr(SqlAlchemyStore, name))
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    store = mlflow_internals.sql_tracking_store(client)
    assert isinstance(store, SqlAlchemyStore)
    run = client.create_run(client.create_experiment("contract", str(tmp_path / "art")))
    run_id = run.info.run_id
    row = {"run_uuid": run_id, "key": "loss", "value": 0.5, "timestamp": 1, "step": 3}
    newest = SqlMetric(run_uuid=run_id, key="loss", value=0.5, timestamp=1, step=3, is_nan=False)
    mlflow_internals.insert_metric_rows(store, run_id, [{**row, "is_nan": False}], [newest])
    assert client.get_run(run_id).data.metrics == {"loss": 0.5}
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")] == [(3, 0.5)]


def test_a_store_that_is_not_sql_is_none() -> None:
    from mlflow.tracking import MlflowClient

    assert mlflow_internals.sql_tracking_store(MlflowClient("http://127.0.0.1:9")) is None


def test_batch_validation_cuts_values_and_refuses_bad_keys() -> None:
    from mlflow.entities import Param, RunTag
    from mlflow.exceptions import MlflowException
    from mlflow.utils import validation

    assert list(inspect.signature(validation._validate_batch_log_data).parameters) == [
        "metrics",
        "params",
        "tags",
    ]
    params, tags = mlflow_internals.validated([Param("p", "x" * 9000)], [RunTag("t", "y" * 9000)])
    assert (len(params[0].value), len(tags[0].value)) == (6000, 8000)
    with pytest.raises(MlflowException):
        mlflow_internals.validated([Param("bad key!", "1")], [])


def test_the_models_have_the_columns_whole_runs_fill() -> None:
    from mlflow.store.tracking.dbmodels import models

    columns = {
        models.SqlRun: {"run_uuid", "name", "artifact_uri", "experiment_id", "source_type"}
        | {"source_name", "entry_point_name", "user_id", "status", "start_time", "end_time"}
        | {"deleted_time", "source_version", "lifecycle_stage"},
        models.SqlTag: {"run_uuid", "key", "value"},
        models.SqlParam: {"run_uuid", "key", "value"},
        models.SqlLatestMetric: {"run_uuid", "key", "value", "timestamp", "step", "is_nan"},
        models.SqlDataset: {"dataset_uuid", "experiment_id", "name", "digest"}
        | {"dataset_source_type", "dataset_source", "dataset_schema", "dataset_profile"},
        models.SqlInput: {"input_uuid", "source_type", "source_id"}
        | {"destination_type", "destination_id"},
        models.SqlInputTag: {"input_uuid", "name", "value"},
        models.SqlExperiment: {"experiment_id", "lifecycle_stage", "artifact_location"},
    }
    for model, used in columns.items():
        assert used <= set(model.__table__.columns.keys()), model


def test_the_sql_store_is_the_module_a_client_imports() -> None:
    import sys

    mlflow_internals.import_sql_store()
    module = sys.modules["mlflow.store.tracking.sqlalchemy_store"]
    assert hasattr(module, "SqlAlchemyStore")
