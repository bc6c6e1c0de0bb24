"""Opening the Optuna storage that holds the ledgers: a journal file (default
``mlruns/optuna.journal``) or any RDB URL (PostgreSQL, MySQL, SQLite)."""

from __future__ import annotations

from pathlib import Path

import optuna

from study.deps import INSTALL
from study.errors import UsageError
from study.paths import journal_path, masked

optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_storage(url: str | None = None, *, create: bool = True) -> optuna.storages.BaseStorage:
    """The Optuna storage for a URL: an RDB URL, or a journal file path (default under mlruns/).

    With ``create=False`` (read-only commands) a journal that does not exist yet is not
    created: the storage is empty and in memory, and nothing is written to disk.

    Raises:
        UsageError: the URL cannot be opened (its password masked in the message).
    """
    if url and "://" in url:
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as exc:  # any driver or URL error is bad input
            hint = ""
            if "DB access module" in str(exc):
                hint = f" (install the driver: {INSTALL['database driver']})"
            reason = masked(str(exc).splitlines()[0], url)
            raise UsageError(f"--storage: cannot open {masked(url)!r}: {reason}{hint}") from None
    path = Path(url) if url else journal_path(create=create)
    if not create and not path.exists():
        return optuna.storages.InMemoryStorage()
    path.parent.mkdir(parents=True, exist_ok=True)
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    return JournalStorage(JournalFileBackend(str(path)))


def list_studies(storage: optuna.storages.BaseStorage) -> list[str]:
    """Names of the studies in a storage (stratum studies hold a '/')."""
    return sorted(s.study_name for s in storage.get_all_studies() if "/" not in s.study_name)
