"""What a fault of a store file means, in one line: a full disk (`StoreFull`, exit 75: free
space, then run the command again) or a damaged file (`StoreDamaged`, exit 2), told apart from
any other error by what the system or SQLite said along the exception's cause chain.

Example: MLflow's ``sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database or
disk is full`` on ``mlruns/mlflow.db`` is ``StoreFull("mlruns/mlflow.db", "database or disk is
full")``; ``(sqlite3.DatabaseError) file is not a database`` is ``StoreDamaged`` with the fix
the caller gives (`mlflow_fault`: move the file aside; ``study resume`` rebuilds it).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

from study.errors import StoreDamaged, StoreFull, StudyError
from study.paths import shown, sqlite_file

#: The errors a write meets on a full disk: no space, the user's quota, the file size limit.
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
#: What SQLite says of a full disk, and of a file that is not (or no longer) a database.
SQLITE_FULL = "database or disk is full"
SQLITE_DAMAGED = ("file is not a database", "database disk image is malformed")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def full_disk(exc: BaseException) -> str | None:
    """What the system said when ``exc`` (or its cause) met a full disk, e.g. ``[Errno 28] No
    space left on device``; None for any other error."""
    for fault in _chain(exc):
        if isinstance(fault, OSError) and fault.errno in FULL_ERRNOS:
            return f"[Errno {fault.errno}] {fault.strerror}"
        if SQLITE_FULL in str(fault):
            return SQLITE_FULL
    return None


def damaged_database(exc: BaseException) -> str | None:
    """What SQLite said when ``exc`` (or its cause) met a damaged database file, e.g. ``file
    is not a database``; None for any other error."""
    for fault in _chain(exc):
        text = str(fault)
        said = next((damage for damage in SQLITE_DAMAGED if damage in text), None)
        if said:
            return said
    return None


def mlflow_fault(exc: BaseException, uri: str) -> StudyError | None:
    """The one-line error for ``exc``, met on the MLflow store at ``uri`` (a local SQLite
    file), if it is a full disk or a damaged file; None otherwise (or for a tracking server,
    whose own disk is not this host's to free).

    The fix for a damaged store: move it aside; the next ``study resume NAME`` (or ``study run
    FILE``) makes a new one and logs every finished trial into it from the ledger
    (`study.tracking.study_tracker.StudyTracker.repair`).
    """
    db = sqlite_file(uri)
    if db is None:
        return None
    full = full_disk(exc)
    if full:
        return StoreFull(shown(db), full)
    damage = damaged_database(exc)
    if damage:
        where = shown(db)
        return StoreDamaged(
            f"the MLflow store {where}",
            f"{damage} (SQLite)",
            f"move it aside (`mv {where} {where}.damaged`) and run `study resume NAME`: it "
            "makes a new store and logs every finished trial into it from the ledger",
        )
    return None


def file_fault(exc: BaseException, path: Path | str) -> StoreFull | None:
    """`StoreFull` naming ``path`` if ``exc`` met a full disk, else None."""
    full = full_disk(exc)
    return StoreFull(shown(Path(path)), full) if full else None
