"""Opening a storage that cannot be opened: one line naming the URL (password masked), what the
driver said and what to check; a real PostgreSQL server for refused credentials and a missing
database, a closed port for a server that is not there."""

from __future__ import annotations

import threading

import optuna
import pytest

from study.errors import FieldError, UsageError
from study.ledger import Ledger, list_studies, open_storage
from study.ledger.records import StudyRecord
from study.ledger.retry import DEFAULT_WINDOW_S, RetryingStorage
from study.ledger.storage import CONNECT_TIMEOUT, engine_kwargs, storage_problem
from tests.services import PostgresServer, free_port


def refused(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The one-line error of opening ``url``, after one connection attempt that waits at most
    `CONNECT_TIMEOUT` seconds (SQLAlchemy's calls of the driver's ``connect`` are counted)."""
    import psycopg

    timeouts: list[object] = []
    connect = psycopg.connect

    def counted(*args: object, **kwargs: object) -> object:
        timeouts.append(kwargs.get("connect_timeout"))
        return connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    with pytest.raises(UsageError) as error:
        open_storage(url)
    assert timeouts == [CONNECT_TIMEOUT]  # once, and bounded: no retries, no endless wait
    message = str(error.value)
    assert "\n" not in message and message.startswith("storage: cannot open ")
    return message


def test_wrong_password_is_named_and_never_shown(
    postgres: PostgresServer, postgres_url: str, monkeypatch: pytest.MonkeyPatch
):
    url = postgres.url(postgres_url.rsplit("/", 1)[1], password="Wr0ngPassw0rd")
    message = refused(url, monkeypatch)
    assert "password authentication failed" in message
    assert "check the user and password" in message
    assert "Wr0ngPassw0rd" not in message and "study:***@" in message


def test_missing_database_is_named(postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch):
    message = refused(postgres.url("no_such_db"), monkeypatch)
    assert 'database "no_such_db" does not exist' in message
    assert "create the database" in message
    assert postgres.password not in message


def test_a_server_not_listening_is_refused_at_once(monkeypatch: pytest.MonkeyPatch):
    url = f"postgresql://study:pw1234@127.0.0.1:{free_port()}/ledger"
    message = refused(url, monkeypatch)
    assert "Connection refused" in message and "is the database server running" in message
    assert "pw1234" not in message


def test_both_spellings_of_postgresql_open_the_same_ledger(postgres_url: str):
    Ledger.open(postgres_url, "shared").create(StudyRecord(name="shared", config_text="x: 1"))
    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    assert list_studies(open_storage(plain)) == ["shared"]
    assert isinstance(database_of(open_storage(plain)), optuna.storages.RDBStorage)


def test_only_database_servers_get_a_connect_timeout():
    assert engine_kwargs("postgresql+psycopg://u:p@h/d") == {
        "connect_args": {"connect_timeout": CONNECT_TIMEOUT},
        "pool_use_lifo": True,
    }
    assert engine_kwargs("mysql+pymysql://u:p@h/d")["connect_args"]["connect_timeout"] > 0
    assert engine_kwargs("sqlite:///x.db") == {}


def test_a_missing_driver_says_how_to_install_it():
    message = storage_problem(
        "mysql://u:secret@h/d",
        ImportError("Failed to import DB access module for the specified storage URL."),
    )
    assert "pip install" in message and "secret" not in message


def tables(url: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        return sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_reading_an_empty_database_creates_nothing(postgres_url: str):
    storage = open_storage(postgres_url, create=False)
    assert isinstance(storage, optuna.storages.InMemoryStorage)
    assert list_studies(storage) == []
    assert tables(postgres_url) == []
    with pytest.raises(UsageError, match="no study named 'x'"):
        Ledger.open(postgres_url, "x", create=False).require()
    assert tables(postgres_url) == []
    Ledger.open(postgres_url, "x").create(StudyRecord(name="x", config_text="a: 1"))
    assert "studies" in tables(postgres_url)
    reread = open_storage(postgres_url, create=False)
    assert isinstance(database_of(reread), optuna.storages.RDBStorage)
    assert list_studies(reread) == ["x"]


def test_reading_a_missing_sqlite_file_does_not_create_it(tmp_path):
    path = tmp_path / "ledger.db"
    storage = open_storage(f"sqlite:///{path}", create=False)
    assert isinstance(storage, optuna.storages.InMemoryStorage)
    assert not path.exists()
    open_storage(f"sqlite:///{path}")
    reread = open_storage(f"sqlite:///{path}", create=False)
    assert isinstance(database_of(reread), optuna.storages.RDBStorage)


def database_of(storage: optuna.storages.BaseStorage) -> optuna.storages.BaseStorage:
    """The database storage under the retry wrapper and Optuna's trial cache."""
    assert isinstance(storage, RetryingStorage)
    return storage.inner._backend


def test_a_database_storage_is_cached_and_retried(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("STUDY_STORAGE_RETRY", raising=False)
    storage = open_storage(f"sqlite:///{tmp_path / 'l.db'}")
    assert storage.outage.window == DEFAULT_WINDOW_S
    monkeypatch.setenv("STUDY_STORAGE_RETRY", "12.5")
    assert open_storage(f"sqlite:///{tmp_path / 'l.db'}").outage.window == 12.5
    assert open_storage(f"sqlite:///{tmp_path / 'l.db'}", retry=0).outage.window == 0
    monkeypatch.setenv("STUDY_STORAGE_RETRY", "soon")
    with pytest.raises(FieldError, match=r"^storage_retry must be a number of seconds >= 0"):
        open_storage(f"sqlite:///{tmp_path / 'l.db'}")
    journal = open_storage(str(tmp_path / "j.journal"))
    assert not isinstance(journal, RetryingStorage)  # a file: nothing to wait for


def test_processes_that_open_a_new_database_at_once_all_open_it(postgres_url: str) -> None:
    """Each creates the tables it does not find; all but the first meet the others' (a
    duplicate type or table) and look again."""
    from study.ledger.storage import _open_database

    start = threading.Barrier(4)
    problems: list[str] = []

    def open_it() -> None:
        start.wait()
        try:
            storage = _open_database(postgres_url, tables=False)
            storage.get_all_studies()
        except FieldError as exc:
            problems.append(str(exc))

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert problems == []


def test_an_open_that_finds_the_tables_meets_the_creators_version_stamp_and_looks_again(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader finds the creator's tables before the creator committed Optuna's version stamp
    (alembic), and stamps it too: the duplicate table is a race, not bad input."""
    import sqlalchemy.exc

    from study.ledger import storage, tokens

    url = f"sqlite:///{tmp_path / 'l.db'}"
    storage._open_database(url, tables=False)  # the creator's tables and stamp
    real, calls = tokens.LedgerRDB, []

    def stamped_meanwhile(*args, **kwargs):
        calls.append(kwargs["skip_table_creation"])
        if len(calls) == 1:
            raise sqlalchemy.exc.IntegrityError(
                "CREATE TABLE alembic_version", {}, Exception("duplicate key value violates ...")
            )
        return real(*args, **kwargs)

    monkeypatch.setattr(tokens, "LedgerRDB", stamped_meanwhile)
    opened = storage._open_database(url, tables=True)
    assert calls == [True, True] and opened.get_all_studies() == []
    monkeypatch.setattr(tokens, "LedgerRDB", lambda *a, **k: (_ for _ in ()).throw(ValueError()))
    with pytest.raises(FieldError):  # any other error is bad input, at once
        storage._open_database(url, tables=True)


@pytest.mark.parametrize("create", [True, False])
def test_a_folder_as_the_journal_file_is_one_field_error(tmp_path, create: bool) -> None:
    with pytest.raises(FieldError, match=r"cannot open the journal file .*Is a directory"):
        open_storage(str(tmp_path), create=create)
