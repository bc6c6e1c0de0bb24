"""The real services the tests start (tests/services.py): PostgreSQL accepts the test role's
password and refuses a wrong one; an MLflow server on PostgreSQL stores runs and artifacts."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy

from tests.services import PostgresServer


def test_postgres_database_accepts_the_role_and_refuses_a_wrong_password(
    postgres: PostgresServer, postgres_url: str
) -> None:
    engine = sqlalchemy.create_engine(postgres_url)
    with engine.connect() as connection:
        assert connection.execute(sqlalchemy.text("select current_user")).scalar() == "study"
    engine.dispose()
    database = postgres_url.rsplit("/", 1)[1]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(
            host=postgres.host,
            port=postgres.port,
            user=postgres.user,
            password="wrong",
            dbname=database,
        )


def test_plain_postgresql_scheme_uses_psycopg_3(postgres: PostgresServer) -> None:
    url = postgres.create_database()
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    engine = sqlalchemy.create_engine(plain)
    assert engine.dialect.driver == "psycopg"
    with engine.connect() as connection:
        assert connection.execute(sqlalchemy.text("select 1")).scalar() == 1
    engine.dispose()


def test_mlflow_server_on_postgres_keeps_runs_and_artifacts(
    mlflow_server_pg: str, tmp_path
) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server_pg)
    experiment = client.create_experiment("services-check")
    run = client.create_run(experiment)
    client.log_param(run.info.run_id, "batch_size", "32")
    note = tmp_path / "note.txt"
    note.write_text("hello")
    client.log_artifact(run.info.run_id, str(note))
    again = client.get_run(run.info.run_id)
    assert again.data.params == {"batch_size": "32"}
    assert again.info.artifact_uri.startswith("mlflow-artifacts:")
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["note.txt"]


def test_a_missing_server_fails_under_ci_and_skips_otherwise(monkeypatch) -> None:
    from tests.services import missing

    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI=1: PostgreSQL is not installed"):
        missing("PostgreSQL", "apt-get install postgresql")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql"):
        missing("PostgreSQL", "apt-get install postgresql")


def test_debian_postgresql_binaries_are_found() -> None:
    from tests.services import missing, postgres_bin

    found = postgres_bin()
    if found is None:
        missing("PostgreSQL's server", "apt-get install postgresql")
    assert found is not None and (found / "initdb").exists() and (found / "postgres").exists()
