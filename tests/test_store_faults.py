"""Telling a full disk and a damaged database from other errors, by what the system and SQLite
said (real errors: a file that is not a database, a disk that has no room), and the one line
each gets; and a damaged SQLite ledger, refused in one line without a write."""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy

from study.errors import FieldError, StorageUnavailable, StoreDamaged, StoreFull
from study.ledger import Ledger, StudyRecord, open_storage
from study.store_faults import damaged_database, file_fault, full_disk, mlflow_fault


def not_a_database(path: Path) -> sqlalchemy.exc.DatabaseError:
    """What SQLAlchemy raises on a file whose header is not SQLite's."""
    path.write_bytes(b"\x00" * 4096)
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT name FROM sqlite_master"))
    except sqlalchemy.exc.DatabaseError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("a file of zeros opened as a database")


def test_a_full_disk_is_told_by_its_errno_or_by_sqlite() -> None:
    def raised_from(cause: BaseException) -> RuntimeError:
        try:
            raise RuntimeError("wrapped") from cause
        except RuntimeError as exc:
            return exc

    no_space = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert full_disk(raised_from(no_space)) == "[Errno 28] No space left on device"
    too_large = OSError(errno.EFBIG, os.strerror(errno.EFBIG))  # past the file size limit
    assert full_disk(too_large) == "[Errno 27] File too large"
    assert full_disk(sqlite3.OperationalError("database or disk is full"))
    assert full_disk(OSError(errno.EACCES, "Permission denied")) is None
    assert full_disk(ValueError("disk")) is None


def test_a_damaged_database_is_told_by_what_sqlite_said(tmp_path: Path) -> None:
    exc = not_a_database(tmp_path / "mlflow.db")
    assert damaged_database(exc) == "file is not a database"
    assert damaged_database(sqlite3.DatabaseError("database disk image is malformed"))
    assert damaged_database(sqlite3.OperationalError("database is locked")) is None


def test_mlflow_faults_name_the_store_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlruns").mkdir()
    db = tmp_path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"

    damaged = mlflow_fault(not_a_database(db), uri)
    assert isinstance(damaged, StoreDamaged)
    assert str(damaged) == (
        "the MLflow store mlruns/mlflow.db is damaged: file is not a database (SQLite); move it "
        "aside (`mv mlruns/mlflow.db mlruns/mlflow.db.damaged`) and run `study resume NAME`: it "
        "makes a new store and logs every finished trial into it from the ledger"
    )
    full = mlflow_fault(sqlite3.OperationalError("database or disk is full"), uri)
    assert isinstance(full, StoreFull) and isinstance(full, StorageUnavailable)  # exit 75
    assert str(full).startswith("no space left for mlruns/mlflow.db (database or disk is full)")
    assert "free space" in str(full)
    assert mlflow_fault(ValueError("no"), uri) is None
    # A tracking server's disk is not this host's to free or to move aside.
    assert mlflow_fault(not_a_database(tmp_path / "x.db"), "http://mlflow:5000") is None
    assert file_fault(ValueError("no"), db) is None


def test_a_damaged_sqlite_ledger_is_one_line_and_not_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    Ledger.open(url, "kept").create(StudyRecord("kept", config_text="name: kept"))
    with open(path, "r+b") as f:
        f.write(b"\x00" * 100)  # its header gone
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    for create in (True, False):
        with pytest.raises(FieldError) as raised:
            open_storage(url, create=create)
        message = str(raised.value)
        assert "\n" not in message
        assert f"cannot open '{url}'" in message and "file is not a database" in message
        assert message.endswith(
            "(the file is damaged: restore it from a backup; nothing was written)"
        )
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
