"""The storages `study` builds, for Optuna's own storage and heartbeat suites
(`tests/ledger/optuna_suite`), plain and with a fault injected on every write.

Storages (`MODES`): ``rdb`` (the RDB storage `open_database` makes, uncached), ``cached`` (it in
Optuna's trial cache, what `open_database` returns), ``retrying`` (`RetryingStorage` around the
uncached one), ``open_storage`` (what ``open_storage("sqlite:///...")`` returns: retried and
cached) and ``journal`` (the default ledger, what ``open_storage(PATH)`` returns: Optuna's
journal storage on `study.ledger.journal`'s checked file backend; plain only, as it is not
retried). All on a SQLite file; the database's tables are made once and copied. An extension's
storage is a mode of a subclass (`StorageSupplier.open_mode`; the storage proxy's:
`tests/ext/storage_proxy/test_storage_contract.py`).

Faults (`FAULTS`), injected at the database under every write transaction (a proxy's too),
the first time each write (its statements and parameters, times left out) is seen:
``lost_answer`` (the commit lands, then the connection drops: the caller sees a transient
error), ``before_commit`` (the connection drops at the
commit: nothing lands) and ``dropped`` (the connection is closed at the transaction's first
write statement, mid-call: nothing lands, the pool gets a new connection). A write that
faulted is let through the next time (its retry), and so is one after `IN_A_ROW` faults with
none let through (a retry that writes something new each time), so every call ends;
`Faults.fired` counts them. Faults apply to the retried storages (`RETRIED`): on the
others a fault is the caller's to handle.

Example: ``with StorageSupplier("retrying/lost_answer") as storage: ...``.
"""

from __future__ import annotations

import datetime
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy
from optuna.storages import BaseStorage

from study.ledger.retry import RetryingStorage
from study.ledger.tokens import LedgerRDB

MODES = ("rdb", "cached", "retrying", "open_storage", "journal")
RETRIED = ("retrying", "open_storage")
FAULTS = ("plain", "lost_answer", "before_commit", "dropped")
#: Every storage plain, every retried one under every fault: ``mode/fault``.
SPECS = [f"{m}/plain" for m in MODES] + [f"{m}/{f}" for m in RETRIED for f in FAULTS[1:]]
#: Optuna's heartbeat lives in its RDB storage (Optuna's suite runs its heartbeat tests on its
#: SQLite storages only, not on its journal or its gRPC proxy).
HEARTBEAT_SPECS = [s for s in SPECS if not s.startswith("journal/")]
#: Optuna's name for its own SQLite storage in the heartbeat suite: the uncached RDB storage.
ALIASES = {"sqlite": "rdb/plain"}
#: Faults in a row (no write let through between them) after which the next write passes.
IN_A_ROW = 8
#: Faults injected per spec, summed over the session (what the runners report).
FIRED: dict[str, int] = {}
_MARK = "study test fault"
_SCHEMA = threading.Lock()
_TEMPLATE: list[Path] = []
#: The specs supplied, in order (`every_fault_fired`).
SUPPLIED: list[str] = []
#: The storage supplied last (`pass_time` ages its heartbeats).
CURRENT: list[StorageSupplier] = []


class Faults:
    """Faults of one ``kind`` (`FAULTS`) injected on an SQLAlchemy engine (see the module
    docstring); ``fired``: how many."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.fired = 0
        self._seen: set[Any] = set()
        self._in_a_row = 0
        self._writes: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def attach(self, engine: sqlalchemy.Engine) -> None:
        if self.kind == "plain":
            return
        sqlalchemy.event.listen(engine, "before_cursor_execute", self._statement)
        sqlalchemy.event.listen(engine, "handle_error", self._disconnect)
        sqlalchemy.event.listen(engine, "rollback", self._rolled_back)
        dialect = engine.dialect
        commit = dialect.do_commit

        def do_commit(connection: Any) -> None:  # the pool's proxy of the DBAPI connection
            raw = getattr(connection, "dbapi_connection", connection)
            writes = self._writes.pop(id(raw), None)
            fire = bool(writes) and self.kind != "dropped" and self._fire(tuple(writes or ()))
            if fire and self.kind == "before_commit":
                raise sqlite3.OperationalError(f"{_MARK}: the connection dropped at the commit")
            commit(connection)
            if fire:
                raise sqlite3.OperationalError(f"{_MARK}: the answer to the commit was lost")

        dialect.do_commit = do_commit  # type: ignore[method-assign]

    def _fire(self, writes: Any) -> bool:
        with self._lock:
            if self._in_a_row >= IN_A_ROW or writes in self._seen:
                self._in_a_row = 0
                return False
            self._seen.add(writes)
            self._in_a_row += 1
            self.fired += 1
            return True

    def _statement(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip()[:6].upper() not in ("INSERT", "UPDATE", "DELETE"):
            return
        raw = conn.connection.dbapi_connection
        writes = self._writes.setdefault(id(raw), [])
        writes.append((statement, _steady(params)))
        if self.kind == "dropped" and len(writes) == 1 and self._fire(tuple(writes)):
            self._writes.pop(id(raw), None)
            raw.close()
            raise sqlite3.OperationalError(f"{_MARK}: the connection dropped mid-call")

    def _rolled_back(self, conn: Any) -> None:
        raw = getattr(conn.connection, "dbapi_connection", None)
        self._writes.pop(id(raw), None)

    @staticmethod
    def _disconnect(context: Any) -> None:
        if _MARK in str(context.original_exception):
            context.is_disconnect = True


def _steady(params: Any) -> Any:
    """Statement parameters with the times left out (a retry writes a later time)."""
    if isinstance(params, dict):
        return tuple(sorted((k, _steady(v)) for k, v in params.items()))
    if isinstance(params, (list, tuple)):
        return tuple(_steady(v) for v in params)
    if isinstance(params, datetime.datetime):
        return "<time>"
    return params


def _database() -> Path:
    """A fresh SQLite file holding Optuna's tables (copied from one made once)."""
    with _SCHEMA:
        if not _TEMPLATE:
            folder = Path(tempfile.mkdtemp(prefix="contract-", dir=_fast_tmp()))
            template = folder / "template.db"
            optuna.storages.RDBStorage(f"sqlite:///{template}").engine.dispose()
            _TEMPLATE.append(template)
    handle, name = tempfile.mkstemp(suffix=".db", dir=_TEMPLATE[0].parent)
    os.close(handle)
    shutil.copyfile(_TEMPLATE[0], name)
    return Path(name)


def _fast_tmp() -> str | None:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def _no_wait(seconds: float) -> None:
    """The retry's backoff, skipped (every fault is over at once)."""


class StorageSupplier(AbstractContextManager):
    """Optuna's `optuna.testing.storages.StorageSupplier` for the storages `study` builds:
    ``spec`` is ``mode/fault`` (or an alias); ``kwargs`` go to the RDB storage (heartbeat)."""

    def __init__(self, spec: str, **kwargs: Any) -> None:
        spec = ALIASES.get(spec, spec)
        self.mode, _, self.fault = spec.partition("/")
        self.spec = spec
        self.kwargs = kwargs
        self.faults = Faults(self.fault)
        self.path: Path | None = None
        self.rdb: LedgerRDB | None = None
        self.storage: BaseStorage | None = None
        self.journal: Path | None = None

    def __enter__(self) -> Any:
        self.path = _database()
        url = f"sqlite:///{self.path}"
        self.rdb = LedgerRDB(
            url,
            engine_kwargs={"connect_args": {"timeout": 300}},
            skip_table_creation=True,
            skip_compatibility_check=True,  # the copy of a database made by this Optuna
            **self.kwargs,
        )
        self.faults.attach(self.rdb.engine)
        sqlalchemy.event.listen(self.rdb.engine, "connect", _unsynced)
        cached = optuna.storages.get_storage(self.rdb)
        mode = self.mode
        if mode == "rdb":
            self.storage = self.rdb
        elif mode == "cached":
            self.storage = cached
        elif mode in ("retrying", "open_storage"):
            inner = self.rdb if mode == "retrying" else cached
            self.storage = RetryingStorage(inner, url, 60.0, sleep=_no_wait, say=_quiet)
        elif mode == "journal":  # the default ledger: a journal file (`study.ledger.journal`)
            from study.ledger.storage import open_storage

            self.journal = self.path.with_suffix(".journal")
            self.storage = open_storage(str(self.journal))
        else:
            self.storage = self.open_mode(mode, cached, url)
        CURRENT[:] = [self]
        SUPPLIED.append(self.spec)
        return self.storage

    def open_mode(self, mode: str, cached: BaseStorage, url: str) -> BaseStorage:
        """The storage of a ``mode`` not in `MODES` (a subclass's), in front of ``cached`` (the
        database at ``url``, faults attached); `close_mode` ends it."""
        raise ValueError(f"no such storage mode: {mode!r}")

    def close_mode(self) -> None:
        """End what `open_mode` started."""

    def __exit__(self, *exc: Any) -> None:
        FIRED[self.spec] = FIRED.get(self.spec, 0) + self.faults.fired
        if self.mode not in MODES:
            self.close_mode()
        if self.rdb is not None:
            self.rdb.engine.dispose()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            for leftover in self.path.parent.glob(f"{self.path.stem}.journal*"):
                leftover.unlink(missing_ok=True)
        CURRENT.clear()


def _unsynced(dbapi_connection: Any, record: Any) -> None:
    """SQLite without waiting for the disk (the suite checks the contract, not durability)."""
    dbapi_connection.execute("PRAGMA synchronous = OFF")


def _quiet(line: str) -> None:
    """The outage lines, not printed (faults come and go hundreds of times)."""


def pass_time(seconds: float) -> None:
    """Instead of sleeping ``seconds``: every heartbeat in the storage supplied last made that
    much older (Optuna's heartbeat suite sleeps past the grace period; the database's clock
    judges heartbeats, so ageing them is the same to the storage)."""
    if not CURRENT or CURRENT[0].path is None:
        return
    with sqlite3.connect(CURRENT[0].path, timeout=300) as db:
        db.execute(
            "UPDATE trial_heartbeats SET heartbeat = datetime(heartbeat, ?)",
            (f"-{int(seconds)} seconds",),
        )
    db.close()


@pytest.fixture(scope="module", autouse=True)
def every_fault_fired() -> Iterator[None]:
    """After a module's tests: every faulty storage they were given did meet faults (a fault
    mode that injects nothing would pass the suite without testing anything)."""
    start, before = len(SUPPLIED), dict(FIRED)
    yield
    specs = {s for s in SUPPLIED[start:] if not s.endswith("/plain")}
    silent = sorted(s for s in specs if FIRED.get(s, 0) == before.get(s, 0))
    assert not silent, f"no fault injected in: {silent}"


def backing(storage: Any) -> Any:
    """The storage inside the retry wrapper (for the suite's exemptions by storage type)."""
    return storage.inner if isinstance(storage, RetryingStorage) else storage
