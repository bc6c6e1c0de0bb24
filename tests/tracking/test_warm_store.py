"""`study.tracking.mlflow_logger.warm_soon`: a database URI's MLflow SQL store is imported in a
thread while a run starts; other stores start nothing."""

from __future__ import annotations

import threading

import pytest

from study.tracking import mlflow_logger
from study.tracking.mlflow_logger import warm_soon


@pytest.mark.parametrize(
    "uri", ["sqlite:///mlruns/mlflow.db", "postgresql+psycopg://u@localhost/db", "MYSQL://h/db"]
)
def test_a_database_uri_imports_the_sql_store_in_a_thread(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    imported: list[str] = []
    monkeypatch.setattr(
        mlflow_logger,
        "import_sql_store",
        lambda: imported.append(threading.current_thread().name),
    )
    thread = warm_soon(uri)
    assert thread is not None and thread.daemon
    thread.join(timeout=60)
    assert imported == ["study-warm-mlflow"]


def test_a_failed_import_is_left_to_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ImportError("no SQLAlchemy here")

    raised: list[object] = []
    monkeypatch.setattr(mlflow_logger, "import_sql_store", broken)
    monkeypatch.setattr(threading, "excepthook", raised.append)
    thread = warm_soon("sqlite:///x.db")
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive() and raised == []


@pytest.mark.parametrize("uri", ["http://127.0.0.1:5000", "file:///tmp/mlruns", "databricks"])
def test_other_stores_start_nothing(uri: str) -> None:
    assert warm_soon(uri) is None
