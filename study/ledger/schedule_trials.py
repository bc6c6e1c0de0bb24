"""A study's schedule trials in its Optuna storage: a ledger of their own, beside the search's.

Schedule trials (`study.config.schedule`) train with a batch size that grows; they are no
stratum of the search, so they live in an Optuna study of their own per (first batch size,
strategy), ``schedule:NAME/b{B0}/{strategy}``: not ``NAME/...``, so no reader of the search's
strata (the analysis, `study status`, the tuners) sees them, and ``/`` keeps them out of
`list_studies`. Everything else is the search's ledger (`Ledger`): slots claimed atomically
within a budget (one trial per seed), heartbeats, recovery of dead owners' trials, the one
encoding of results; its cells are `ScheduleStratum`, so MLflow keys their runs apart from the
fixed batch size of the same numbers (``NAME/schedule-b32/default#0``).

Example::

    ledger = Ledger.open(url, "mnist1d")
    schedules = ScheduleLedger.of(ledger)
    cell = ScheduleStratum(32, "default")
    slot = schedules.claim(cell, budget=3)     # trial 0, 1, 2, then None
    schedules.trials(cell)                     # LedgerTrial records, stratum == cell
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from study.config.space import ScheduleStratum, Stratum
from study.ledger.store import Ledger

__all__ = ["PREFIX", "ScheduleLedger"]

#: What the Optuna study names of schedule trials start with (then the study's name).
PREFIX = "schedule:"


class ScheduleLedger(Ledger):
    """The schedule trials of one study (see the module docstring)."""

    @classmethod
    def of(cls, ledger: Ledger) -> ScheduleLedger:
        """The schedule trials of ``ledger``'s study, on the same storage and clock."""
        return cls(ledger.storage, ledger.name, ledger.clock)

    def _stratum_name(self, stratum: Stratum) -> str:
        return f"{PREFIX}{self.name}/b{stratum.batch_size}/{stratum.strategy}"

    def _stratum_of(self, study_name: str, attrs: Mapping[str, Any]) -> Stratum:
        return ScheduleStratum(int(attrs["batch_size"]), str(attrs["strategy"]))

    def strata(self) -> list[Stratum]:
        """The cells of schedule trials stored for this study."""
        prefix = f"{PREFIX}{self.name}/"
        found = [
            self._stratum_of(s.study_name, s.user_attrs)
            for s in self.storage.get_all_studies()
            if s.study_name.startswith(prefix) and "batch_size" in s.user_attrs
        ]
        return sorted(found, key=lambda s: (s.strategy, s.batch_size))

    def cell(self, batch_size: int, strategy: str) -> ScheduleStratum:
        return ScheduleStratum(batch_size, strategy)

