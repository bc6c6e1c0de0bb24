"""The study ledger: every trial of every tuner, in one Optuna storage.

`Ledger` (in `store`) is the only way in or out; trials come out as frozen `LedgerTrial`
records (in `records`, with the one encoding of results). `owners` tells whether the process
that claimed a trial still runs. `records` imports no Optuna (analysis reads it); the storage
names are imported lazily.

Default storage: Optuna's journal file ``mlruns/optuna.journal`` (safe for several processes on
one machine); any Optuna RDB URL (PostgreSQL, MySQL, SQLite) serves several machines.
"""

from __future__ import annotations

from typing import Any

from study.ledger.records import LedgerTrial, StratumSummary, StudyRecord, StudySummary, best_of

_STORE = ("Ledger", "Slot", "list_studies", "open_storage")


def __getattr__(name: str) -> Any:
    if name in _STORE:
        from study.ledger import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    *_STORE,
    "LedgerTrial",
    "StratumSummary",
    "StudyRecord",
    "StudySummary",
    "best_of",
]
