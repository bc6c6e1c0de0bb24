"""A new local MLflow store starts as a copy of an empty, migrated one.

MLflow creates a SQLite tracking store by running every schema migration it has ever had:
about 1.2 CPU-seconds and 1.4-3 s of wall time here (`benchmarks/store_template.py`), a fifth
of what a small ``study run`` spends in its own process. So the first local store made with an
MLflow version is migrated once more into ``cache_dir()/mlflow-stores/<version>-<head>.db``,
with no experiment in it, and every new local store is a copy of that file. The head revision
itself is kept beside it (``<version>-<fingerprint of the migration scripts>.head``). MLflow
opens the copy as the store it would have made: its tables and schema revision are the same,
and it adds the Default experiment then, with the new store's own artifact root.

Anything that goes wrong on this path (an MLflow without the internals `study.adapters.mlflow_internals` uses, a cache that cannot
be written) leaves the store for MLflow to create as before.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
from pathlib import Path

from study.paths import cache_dir, sqlite_file

__all__ = ["seed_new_store", "template_path"]

_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
#: The template this process made or found, by path (a process makes many stores in tests).
_KNOWN: dict[str, Path] = {}


def _version_key() -> str:
    """The installed MLflow version and the schema revision its migrations end at (read once
    per version and set of migration scripts, then kept beside the templates: Alembic loads
    every script to find it, about half a second)."""
    import mlflow

    from study.adapters.mlflow_internals import latest_schema_revision, migrations_fingerprint

    version, fingerprint = mlflow.__version__, migrations_fingerprint()
    kept = cache_dir() / "mlflow-stores" / f"{version}-{fingerprint}.head"
    if fingerprint is not None:
        with contextlib.suppress(OSError):
            head = kept.read_text().strip()
            if head:
                return f"{version}-{head}"
    head = latest_schema_revision()
    if fingerprint is not None:
        with contextlib.suppress(OSError):
            kept.parent.mkdir(parents=True, exist_ok=True)
            scratch = _scratch(kept)
            scratch.write_text(head)
            os.replace(scratch, kept)
    return f"{version}-{head}"


def template_path() -> Path:
    """Where this MLflow version's empty, migrated store is kept (made on first use)."""
    key = _version_key()
    with _LOCK:
        known = _KNOWN.get(key)
        if known is not None and known.is_file():
            return known
        folder = cache_dir() / "mlflow-stores"
        path = folder / f"{key}.db"
        if not path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            _migrate_into(path)
        _KNOWN[key] = path
        return path


def _migrate_into(path: Path) -> None:
    """Run MLflow's table creation and migrations in a new file, then move it to ``path``
    (atomically: a process reading the cache sees no half-made template)."""
    from study.adapters.mlflow_internals import create_tables

    scratch = _scratch(path)
    try:
        create_tables(f"sqlite:///{scratch}")
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)


def seed_new_store(uri: str) -> bool:
    """Create the local SQLite store ``uri`` from the template if it does not exist yet;
    whether it did. Call it holding the store's lock (`mlflow_logger._store_lock`)."""
    db = sqlite_file(uri)
    if db is None or db.exists() or not db.parent.is_dir():
        return False
    scratch = _scratch(db)
    try:
        shutil.copyfile(template_path(), scratch)
        _write_ahead(scratch)
        os.replace(scratch, db)
    except Exception as exc:  # any failure: MLflow creates the store itself, as before
        _LOG.debug("no MLflow store template (%s); MLflow migrates the new store", exc)
        return False
    finally:
        scratch.unlink(missing_ok=True)
    return True


def _write_ahead(db: Path) -> None:
    """Put the SQLite file ``db`` in write-ahead-log mode (kept in the file): a commit then
    appends to the log and syncs it once, where the default rollback journal writes, syncs and
    deletes a journal and syncs the database besides."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")


def _scratch(path: Path) -> Path:
    """A file name next to ``path`` for this process and thread to write before a rename."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
