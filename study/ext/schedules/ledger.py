"""A study's schedule trials in its Optuna storage: a ledger of their own, beside the search's.

Schedule trials (`study.ext.schedules`) train with a batch size that grows; they are no
stratum of the search, so they live in an Optuna study of their own per schedule and
strategy, ``schedule:NAME/{digest}/b{B0}/{strategy}`` (``digest``: `BatchSchedule.digest`, so
an edited schedule gets trials of its own and never counts the old one's): not ``NAME/...``, so
no reader of the search's strata (the analysis, `study status`, the tuners) sees them, and
``/`` keeps them out of `list_studies`. The schedule itself is stored with its trials (the
study's attribute ``batch_schedule``), so a report reads every schedule a study ever ran,
whatever study file it was run from. Everything else is the search's ledger (`Ledger`, given
`SCHEDULE_STRATA` as its `StratumNaming`): slots claimed atomically within a budget (one trial
per seed), heartbeats, recovery of dead owners' trials, the one encoding of results; its cells
are `ScheduleStratum`, so MLflow keys their runs apart from the fixed batch size of the same
numbers (``NAME/schedule-1a2b3c4d-b32/default#0``).

Example::

    schedules = ScheduleLedger.of(Ledger.open(url, "mnist1d"))
    cell = schedules.cell(ScheduleTrials(schedule), "default")   # stores the schedule
    slot = schedules.claim(cell, budget=3)     # trial 0, 1, 2, then None
    schedules.schedules()                      # [(cell, ScheduleTrials)], as stored
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from study.config.space import Stratum
from study.config.yaml_reader import Reader
from study.ext.schedules.section import ScheduleTrials, read_schedule_trials
from study.ledger.store import Ledger

__all__ = ["PREFIX", "SCHEDULE_STRATA", "ScheduleLedger", "ScheduleStrata", "ScheduleStratum"]

#: What the Optuna study names of schedule trials start with (then the study's name).
PREFIX = "schedule:"
#: The study attribute that holds a cell's schedule (its section's mapping, as JSON).
SCHEDULE_ATTR = "batch_schedule"


@dataclass(frozen=True)
class ScheduleStratum(Stratum):
    """The cell of a study's schedule trials (`study.ext.schedules`): their first batch size,
    strategy and the schedule's ``digest`` (`BatchSchedule.digest`: another schedule is another
    cell). Never equal to the `Stratum` of the same numbers (a schedule is not a fixed batch
    size); ``str()`` gives ``schedule-1a2b3c4d-b32/default``.
    """

    digest: str = ""

    def __str__(self) -> str:
        return f"schedule-{self.digest}-b{self.batch_size}/{self.strategy}"


@dataclass(frozen=True)
class ScheduleStrata:
    """The cells of schedule trials as a ledger's strata (`study.ledger.naming.StratumNaming`):
    ``schedule:NAME/{digest}/b{B0}/{strategy}``, a stored one only once its schedule is."""

    def name(self, study: str, stratum: Stratum) -> str:
        digest = getattr(stratum, "digest", "")
        return f"{PREFIX}{study}/{digest}/b{stratum.batch_size}/{stratum.strategy}"

    def of(self, study: str, study_name: str, attrs: Mapping[str, Any]) -> Stratum | None:
        if not study_name.startswith(f"{PREFIX}{study}/") or SCHEDULE_ATTR not in attrs:
            return None
        return ScheduleStratum(int(attrs["batch_size"]), str(attrs["strategy"]), attrs["digest"])


#: How a `ScheduleLedger` names its cells.
SCHEDULE_STRATA = ScheduleStrata()


class ScheduleLedger(Ledger):
    """The schedule trials of one study (see the module docstring): a `Ledger` whose strata
    are named by `SCHEDULE_STRATA`, with its cells' schedules."""

    @classmethod
    def of(cls, ledger: Ledger) -> ScheduleLedger:
        """The schedule trials of ``ledger``'s study, on the same storage and clock."""
        return cls(ledger.storage, ledger.name, ledger.clock, SCHEDULE_STRATA)

    def cell(self, trials: ScheduleTrials, strategy: str) -> ScheduleStratum:
        """The cell of ``trials`` on ``strategy``, its schedule stored with it."""
        plan = trials.schedule
        cell = ScheduleStratum(plan.first_batch_size, strategy, plan.digest())
        study = self.access.study(cell)
        if SCHEDULE_ATTR not in study.user_attrs:
            study.set_user_attr(SCHEDULE_ATTR, json.dumps(trials.to_mapping()))
            study.set_user_attr("digest", cell.digest)
        return cell

    def schedules(self) -> list[tuple[ScheduleStratum, ScheduleTrials]]:
        """Every stored cell with its schedule, by strategy and first batch size."""
        found = []
        for s in self._schedule_studies():
            cell = SCHEDULE_STRATA.of(self.name, s.study_name, s.user_attrs)
            data = json.loads(s.user_attrs[SCHEDULE_ATTR])
            trials = read_schedule_trials(Reader(s.study_name), data)
            assert isinstance(cell, ScheduleStratum) and trials is not None
            found.append((cell, trials))
        return sorted(found, key=lambda item: (item[0].strategy, item[0].batch_size))

    def _schedule_studies(self) -> list[Any]:
        prefix = f"{PREFIX}{self.name}/"
        return [
            s
            for s in self.storage.get_all_studies()
            if s.study_name.startswith(prefix) and SCHEDULE_ATTR in s.user_attrs
        ]
