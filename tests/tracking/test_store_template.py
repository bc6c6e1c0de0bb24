"""Tests for study.tracking.store_template: a new local MLflow store copied from a migrated
template is the store MLflow would have made, and only the template pays for the migrations."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mlflow.store.db.utils as db_utils
import pytest
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

from study.tracking import store_template
from study.tracking.mlflow_logger import MlflowLogger
from study.tracking.store_template import seed_new_store, template_path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the template, made once for the module (its migrations are slow)."""
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUDY_CACHE_DIR", str(folder))
        patch.setattr(store_template, "_KNOWN", {})
        template_path()
    return folder


@pytest.fixture
def migrations(cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """The module's cache, its template on disk but not yet known to this process (as in a
    new process); the engine URL of every store MLflow migrates, in order."""
    monkeypatch.setenv("STUDY_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)  # MLflow's Default experiment lives under ./mlruns
    monkeypatch.setattr(store_template, "_KNOWN", {})
    calls: list[str] = []
    initialize = db_utils._initialize_tables

    def counted(engine: Any) -> None:
        calls.append(str(engine.url))
        initialize(engine)

    monkeypatch.setattr(db_utils, "_initialize_tables", counted)
    yield calls


def statement(sql: str) -> tuple[str, ...]:
    """A CREATE statement's lines without their order (MLflow's migrations write a table's
    constraints in an order that varies between runs)."""
    return tuple(sorted(line.strip().rstrip(",").strip() for line in sql.splitlines()))


def contents(db: Path) -> dict[str, object]:
    """A store's schema (every CREATE statement), schema revision and rows of its small
    tables, as comparable values."""
    with sqlite3.connect(db) as con:
        schema = sorted(
            statement(sql) for (sql,) in con.execute("SELECT sql FROM sqlite_master") if sql
        )
        tables = [
            name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        rows = {
            t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"')))
            for t in tables
            if t not in ("experiments", "sqlite_sequence")
        }
        experiments = list(
            con.execute(
                "SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments"
            )
        )
    con.close()
    return {"schema": schema, "rows": rows, "experiments": experiments}


def new_store(path: Path) -> MlflowLogger:
    path.mkdir(parents=True)
    return MlflowLogger(f"sqlite:///{path / 'mlflow.db'}")


def test_a_store_from_the_template_is_the_store_mlflow_makes(
    migrations: list[str], tmp_path: Path
) -> None:
    (tmp_path / "by-mlflow").mkdir()
    made = SqlAlchemyStore(f"sqlite:///{tmp_path / 'by-mlflow' / 'mlflow.db'}", "./mlruns")
    made.engine.dispose()
    copied = new_store(tmp_path / "copied")

    assert migrations == [f"sqlite:///{tmp_path / 'by-mlflow' / 'mlflow.db'}"]  # not the copy
    assert contents(tmp_path / "copied" / "mlflow.db") == contents(
        tmp_path / "by-mlflow" / "mlflow.db"
    )
    default = copied.client.get_experiment("0")
    assert default.name == "Default"
    assert default.artifact_location == str(tmp_path / "mlruns" / "0")  # this store's own
    # ... and it is a working store: an experiment, a run, a metric.
    experiment = copied.experiment_id("copied-store")
    run = copied.client.create_run(experiment)
    copied.client.log_metric(run.info.run_id, "loss", 0.5, step=3)
    assert copied.client.get_metric_history(run.info.run_id, "loss")[0].value == 0.5


def test_new_stores_are_copies_and_never_migrated(
    migrations: list[str], cache: Path, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        new_store(tmp_path / name)

    assert migrations == []
    assert template_path().parent == cache / "mlflow-stores"
    with sqlite3.connect(template_path()) as con:
        assert list(con.execute("SELECT * FROM experiments")) == []  # MLflow adds its own
    con.close()


def test_the_first_store_makes_the_template_once(
    migrations: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path / "empty-cache"))
    new_store(tmp_path / "first")
    assert len(migrations) == 1 and "empty-cache/mlflow-stores" in migrations[0]
    monkeypatch.setattr(store_template, "_KNOWN", {})  # a new process: the cache is on disk

    new_store(tmp_path / "second")

    assert len(migrations) == 1


def test_an_unwritable_cache_leaves_the_store_to_mlflow(
    migrations: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path / "not-a-folder"))

    logger = new_store(tmp_path / "store")

    assert len(migrations) == 1 and "store/mlflow.db" in migrations[0]  # MLflow made it
    assert logger.client.get_experiment("0").name == "Default"
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["mlflow.db", "mlflow.db.lock"]


def test_only_a_missing_local_store_is_seeded(migrations: list[str], tmp_path: Path) -> None:
    logger = new_store(tmp_path / "store")
    experiment = logger.experiment_id("kept")
    db = tmp_path / "store" / "mlflow.db"
    before = db.read_bytes()

    assert not seed_new_store(f"sqlite:///{db}")  # there already: untouched
    assert db.read_bytes() == before
    assert MlflowLogger(f"sqlite:///{db}").client.get_experiment(experiment).name == "kept"
    assert not seed_new_store("http://127.0.0.1:5000")
    assert not seed_new_store("sqlite:///:memory:")
    assert not seed_new_store(f"sqlite:///{tmp_path / 'no-such-folder' / 'mlflow.db'}")
    assert not (tmp_path / "no-such-folder").exists()


def test_a_new_store_keeps_a_write_ahead_log(migrations: list[str], tmp_path: Path) -> None:
    """A copy is in WAL mode (one sync per commit), kept in the file for every process."""
    store = new_store(tmp_path / "wal")
    run = store.client.create_run(store.experiment_id("wal"))
    store.client.log_metric(run.info.run_id, "loss", 0.25, step=1)
    con = sqlite3.connect(tmp_path / "wal" / "mlflow.db")
    try:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert con.execute("SELECT value FROM metrics").fetchall() == [(0.25,)]
    finally:
        con.close()


def test_the_head_revision_is_read_once_then_kept(
    migrations: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alembic loads every migration script to name the head; a new process finds it kept
    beside the templates instead, under the scripts' fingerprint."""
    from study.adapters import mlflow_internals

    monkeypatch.setenv("STUDY_CACHE_DIR", str(tmp_path / "fresh-cache"))
    asked: list[str] = []
    real = mlflow_internals.latest_schema_revision

    def counted() -> str:
        asked.append(real())
        return asked[-1]

    monkeypatch.setattr(mlflow_internals, "latest_schema_revision", counted)
    first = store_template._version_key()
    kept = list((tmp_path / "fresh-cache" / "mlflow-stores").glob("*.head"))
    assert len(asked) == 1 and first.endswith(f"-{asked[0]}")
    assert [path.read_text() for path in kept] == [asked[0]]
    assert store_template._version_key() == first and len(asked) == 1  # read from the file
    monkeypatch.setattr(mlflow_internals, "migrations_fingerprint", lambda: "another-set")
    assert store_template._version_key() == first and len(asked) == 2  # other scripts: asked
