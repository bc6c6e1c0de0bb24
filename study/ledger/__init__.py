"""The study ledger: every trial of every tuner, in one Optuna storage.

`Ledger` (in `store`) is the only way in or out: the study's record, and parts each given
what it needs, one job each: ``ledger.claims`` (`claims`: claim a slot, record its trial),
``ledger.reader`` (`reading`: trials read back; these two parts' methods are the ledger's own
too), ``ledger.liveness`` (`liveness`: heartbeats by an injected `clock`, stale trials),
``ledger.tuning`` (`tuning`: samplers, windows, points) and ``ledger.notes`` (`study_notes`:
pilot, throughput probe, allocation state), all on one ``ledger.access`` (`access`: the
storage; its strata named by a `naming.StratumNaming`). Trials come out as frozen
`LedgerTrial` records (in `records`, with the one encoding of results; `optuna_view` is what
Optuna readers see of them, every value in steps), the study's notes as the frozen records of
`notes`. `storage` opens the Optuna storage, `summary` sums a study up
for `study ls`/`status`, and `owners` tells whether the process that claimed a trial still
runs. `records` and `notes` import no Optuna (analysis reads them); the names that need Optuna
are imported lazily.

Default storage: Optuna's journal file ``mlruns/optuna.journal`` (safe for several processes on
one machine); any Optuna RDB URL (PostgreSQL, MySQL, SQLite) serves several machines.
"""

from __future__ import annotations

from typing import Any

from study.ledger.notes import AllocationState, Decision, Pilot, ThroughputRow
from study.ledger.records import LedgerTrial, StudyRecord, best_of
from study.ledger.summary import StratumSummary, StudySummary

#: Names that need Optuna, imported on first use, and their modules.
_LAZY = {
    "Ledger": "store",
    "Slot": "store",
    "list_studies": "storage",
    "open_storage": "storage",
    "retry_window": "storage",
    "RETRY_ENV": "storage",
    "stored_names": "storage",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"study.ledger.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    *_LAZY,
    "AllocationState",
    "Decision",
    "LedgerTrial",
    "Pilot",
    "StratumSummary",
    "StudyRecord",
    "StudySummary",
    "ThroughputRow",
    "best_of",
]
