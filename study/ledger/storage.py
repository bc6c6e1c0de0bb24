"""Opening the Optuna storage that holds the ledgers: a journal file (default
``mlruns/optuna.journal``), any RDB URL (PostgreSQL, MySQL, SQLite), or a URL whose scheme a
loaded extension opens (`study.extension.storage_opener`: ``grpc://HOST:PORT`` and
``grpcs://``, the storage proxy's, ``study serve-storage``).

A database server that does not answer, refuses the credentials or lacks the database fails
in seconds (`CONNECT_TIMEOUT`) with one line that names the URL (its password masked) and the
fix. ``postgresql://`` and ``postgresql+psycopg://`` both connect with psycopg 3
(SQLAlchemy 2.1's default PostgreSQL driver).

Once open, a database storage (Optuna's, creating a trial in one attempt:
`study.ledger.tokens.LedgerRDB`) is wrapped in Optuna's trial cache (a finished trial is read from
the database once per process) and in `study.ledger.retry.RetryingStorage`: a database that
restarts, fails over or drops the connection is waited for, up to the retry window
(`retry_window`: the command line's option, the study file's ``storage_retry``, or
``$STUDY_STORAGE_RETRY``; default 300 s). Pooled connections that sat idle are checked before
use (`study.ledger.pings`), so one the server dropped is replaced, not failed. A process opens
each database once (`open_database` keeps it by URL): ``study worker`` reads the study's record,
checks its code version and opens its ledger over one connection pool, not three (each open
is a new connection and a few reads of Optuna's schema version). Hosts that open a new
database at once all create its tables; those that meet another's (a duplicate table or type)
look again, a few times over a few seconds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from study.deps import driver_install
from study.errors import FieldError, StoreDamaged
from study.paths import exists, journal_path, masked

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: Seconds to wait for a database server to accept a connection.
CONNECT_TIMEOUT = 10
#: The environment variable that sets the retry window (the command line's option sets it too).
RETRY_ENV = "STUDY_STORAGE_RETRY"
#: The databases this process opened, by URL (`open_database`).
_OPENED: dict[str, optuna.storages.BaseStorage] = {}
_OPENED_LOCK = threading.Lock()


def retry_window(seconds: float | None = None) -> float:
    """The retry window: ``seconds`` if given, else ``$STUDY_STORAGE_RETRY``, else
    `study.ledger.retry.DEFAULT_WINDOW_S`.

    Raises:
        FieldError: on ``storage_retry``: not a number of seconds >= 0.
    """
    from study.ledger.retry import DEFAULT_WINDOW_S

    value: Any = seconds if seconds is not None else os.environ.get(RETRY_ENV)
    if value is None or value == "":
        return DEFAULT_WINDOW_S
    try:
        window = float(value)
    except (TypeError, ValueError):
        window = -1.0
    if not window >= 0 or window == float("inf"):
        raise FieldError("storage_retry", "must be a number of seconds >= 0", value)
    return window


#: What to check, by what the driver said (the first match wins).
_HINTS = (
    (
        "file is not a database",
        "the file is damaged: restore it from a backup; nothing was written",
    ),
    (
        "disk image is malformed",
        "the file is damaged: restore it from a backup; nothing was written",
    ),
    ("database or disk is full", "free space on its disk, then run the command again"),
    ("password authentication failed", "check the user and password in the URL"),
    ("access denied", "check the user and password in the URL"),
    ("does not exist", "create the database first or fix its name in the URL"),
    ("unknown database", "create the database first or fix its name in the URL"),
    ("connection refused", "is the database server running and listening there?"),
    ("timeout", "is the database server running and reachable from this host?"),
    ("timed out", "is the database server running and reachable from this host?"),
    ("could not translate host name", "check the host name in the URL"),
    ("name or service not known", "check the host name in the URL"),
    ("db access module", "install the driver: {driver}"),
    ("no module named", "install the driver: {driver}"),
)


def open_storage(
    url: str | None = None,
    *,
    create: bool = True,
    retry: float | None = None,
    now: Callable[[], float] = time.time,
) -> optuna.storages.BaseStorage:
    """The Optuna storage for a URL: an RDB URL, one whose scheme an extension opens
    (``grpc://HOST:PORT``, ``grpcs://HOST:PORT``: a storage proxy), or a journal file path
    (default under mlruns/).

    With ``create=False`` (read-only commands) a journal, SQLite file or database without
    Optuna's tables is not created: the storage is empty and in memory, and nothing is written.
    A database storage is cached and retried (see the module docstring; ``retry``: the window
    in seconds, `retry_window`; ``now``: the clock heartbeats are judged by).

    Raises:
        FieldError: on ``storage``: the URL cannot be opened (its password masked), or its
            scheme needs an extension that is not loaded.
    """
    from study.extension import storage_opener

    opener = storage_opener(url) if url else None  # grpc://: the storage proxy's, ...
    if opener is not None:
        return opener(url, retry_window(retry), now)
    if url and "://" in url:
        window = retry_window(retry)
        try:
            empty = not create and not _has_ledger_tables(url)
        except Exception as exc:  # any driver or URL error is bad input
            raise FieldError("storage", detail=storage_problem(url, exc)) from None
        if empty:
            return optuna.storages.InMemoryStorage()
        from study.ledger.retry import RetryingStorage

        return RetryingStorage(open_database(url, tables=not create), masked(url), window, now=now)
    path = Path(url) if url else journal_path(create=create)
    if not create and not exists(path):
        return optuna.storages.InMemoryStorage()
    from optuna.storages.journal import JournalStorage

    from study.ledger.journal import CheckedJournalBackend

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(CheckedJournalBackend(path))
    except StoreDamaged:
        raise  # its own line (`study.ledger.journal`)
    except (OSError, ValueError) as exc:  # a folder, a name the system refuses
        reason = getattr(exc, "strerror", None) or str(exc)
        raise FieldError(
            "storage",
            detail=f"cannot open the journal file {str(path)!r} ({reason}); give a "
            "file path (a new one starts an empty ledger) or a database URL",
        ) from None


def open_database(url: str, *, tables: bool = False) -> optuna.storages.BaseStorage:
    """The database storage at an RDB ``url``, cached (Optuna's trial cache) but not retried,
    its tables created if missing (``tables``: they are known to exist, nothing is created);
    a database server's is opened once per process (later calls get the same storage; a
    SQLite file's is opened anew, the file may be gone).

    Raises:
        FieldError: on ``storage``: the URL cannot be opened (its password masked).
    """
    if not engine_kwargs(url):
        return _open_database(url, tables)
    with _OPENED_LOCK:
        opened = _OPENED.get(url)
        if opened is None:
            opened = _OPENED[url] = _open_database(url, tables)
        return opened


def _open_database(url: str, tables: bool) -> optuna.storages.BaseStorage:
    from study.ledger.tokens import LedgerRDB  # Optuna's, its trial creation one attempt

    for attempt in range(_CREATE_ATTEMPTS):
        try:
            rdb = LedgerRDB(url, engine_kwargs=engine_kwargs(url), skip_table_creation=tables)
            break
        except Exception as exc:  # any driver or URL error is bad input
            # Another process creates them: look again. Also when the tables are known to exist
            # (``tables``): Optuna stamps its schema version (alembic) on every open that finds
            # none, and a process that opens while the creator has not committed its stamp yet
            # creates the same table.
            if attempt == _CREATE_ATTEMPTS - 1 or not _created_meanwhile(exc):
                raise FieldError("storage", detail=storage_problem(url, exc)) from None
            time.sleep(0.1 * 2**attempt)
    if engine_kwargs(url):  # a database server (not SQLite)
        from study.ledger.pings import ping_when_idle

        ping_when_idle(rdb.engine)
    return optuna.storages.get_storage(rdb)


#: Tries to create a new database's tables while other processes create them too.
_CREATE_ATTEMPTS = 6
#: What a database says when another process created a table (or its type) first.
_CREATED_FIRST = ("already exists", "duplicate key value", "unique constraint failed")


def _created_meanwhile(exc: BaseException) -> bool:
    """Whether creating the tables failed because another process was creating them too (two
    hosts that open a new database at once both find no tables, and both create them)."""
    import sqlalchemy.exc

    text = str(exc).lower()
    return isinstance(exc, sqlalchemy.exc.DatabaseError) and any(s in text for s in _CREATED_FIRST)


def _has_ledger_tables(url: str) -> bool:
    """Whether the database at ``url`` holds Optuna's tables (a missing SQLite file does not,
    and is not created by asking)."""
    import sqlalchemy

    if url in _OPENED:  # opened (its tables created) by this process
        return True
    parsed = sqlalchemy.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or not Path(database).exists():
            return False
    engine = sqlalchemy.create_engine(url, **engine_kwargs(url))
    try:
        return sqlalchemy.inspect(engine).has_table("studies")
    finally:
        engine.dispose()


def engine_kwargs(url: str) -> dict[str, Any]:
    """SQLAlchemy engine options for a storage URL: a connection timeout for database servers
    (PostgreSQL, MySQL), nothing for SQLite."""
    scheme = url.partition("://")[0].partition("+")[0].lower()
    if scheme in ("postgresql", "postgres", "mysql", "mariadb"):
        # LIFO: one connection serves a busy process, the others sit idle (and are checked
        # before use, `study.ledger.pings`).
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT}, "pool_use_lifo": True}
    return {}


def storage_problem(url: str, exc: BaseException) -> str:
    """One line saying why the storage at ``url`` cannot be opened and what to check, e.g.
    ``cannot open 'postgresql://study:***@db:5432/ledger': (psycopg.OperationalError)
    connection failed: ... password authentication failed for user "study" (check the user and
    password in the URL)``."""
    text = " ".join(str(exc).split())  # the driver's message may span lines
    reason = masked(text.partition(" (Background on this error")[0], url)
    lowered = text.lower()
    hint = next((fix for key, fix in _HINTS if key in lowered), None)
    hint = hint.format(driver=driver_install()) if hint else None
    return f"cannot open {masked(url)!r}: {reason}" + (f" ({hint})" if hint else "")


def list_studies(storage: optuna.storages.BaseStorage) -> list[str]:
    """Names of the studies in a storage (stratum studies hold a '/')."""
    return sorted(s.study_name for s in storage.get_all_studies() if "/" not in s.study_name)


def stored_names(storage: optuna.storages.BaseStorage) -> list[str]:
    """Names of every study in a storage, strata and round claims included."""
    return sorted(s.study_name for s in storage.get_all_studies())
