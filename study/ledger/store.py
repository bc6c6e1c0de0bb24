"""The ledger: one study's trials in an Optuna storage, behind typed methods, by job.

Layout in the storage: a root Optuna study named after the study (its attributes: a
`StudyRecord` and the study's notes) and one Optuna study per stratum, named
``NAME/b{batch}/{strategy}``, whose trials are the stratum's trials (attributes encoded by
`study.ledger.records`).

`Ledger` is the study's record (create, read, delete, summarise); it is built from parts,
each one job behind a public, typed interface, each given the parts it needs when it is made:

- ``ledger.access`` (`access.StorageAccess`): the storage, its study and trial ids, the
  stratum studies (named by a `naming.StratumNaming`), the writes held and the recent reads,
  and the clock (`clock.SYSTEM_CLOCK` unless one is given: a test passes a fake); every other
  part is given it;
- ``ledger.reader`` (`reading.TrialReader`): the strata and their trials, read back as
  `LedgerTrial` records;
- ``ledger.claims`` (`claims.Claims`, given the reader): claiming a slot of a stratum's
  budget and recording how its trial went;
- ``ledger.liveness`` (`liveness.Liveness`): heartbeats, live owners, recovering the trials
  of processes that died;
- ``ledger.tuning`` (`tuning.TunerState`): the sampler, learning-rate windows, params chosen
  outside the sampler, reserved points;
- ``ledger.notes`` (`study_notes.StudyNotes`, given `Ledger.require`): the pilot, the
  throughput probe and the adaptive allocation's state and round claims (typed in `notes`).

The methods of the claims and the reader are also the ledger's own (``ledger.claim(...)`` is
``ledger.claims.claim(...)``). Trials kept beside the search's, under other names, are a
ledger given another naming (`schedule_trials.ScheduleLedger`). Only the ledger package
touches the storage; everything else reads `LedgerTrial` records and the typed notes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import optuna

from study.adapters.optuna_internals import id_of_study
from study.config.space import Stratum
from study.config.target import Target
from study.errors import StudyNotFound
from study.ledger import batch
from study.ledger.access import Slot, StorageAccess
from study.ledger.claims import Claims
from study.ledger.clock import SYSTEM_CLOCK, Clock
from study.ledger.liveness import Liveness
from study.ledger.naming import SEARCH_STRATA, StratumNaming
from study.ledger.reading import TrialReader
from study.ledger.records import LedgerTrial, Origin, StudyRecord
from study.ledger.storage import open_storage
from study.ledger.study_notes import StudyNotes
from study.ledger.summary import StudySummary, summarize
from study.ledger.tuning import TunerState
from study.results import TrialResult

optuna.logging.set_verbosity(optuna.logging.WARNING)

__all__ = ["Ledger", "Slot"]


class Ledger:
    """One study's record and trials in an Optuna storage, and its parts (see the module
    docstring); ``naming`` names its strata (the search's unless told otherwise)."""

    def __init__(
        self,
        storage: optuna.storages.BaseStorage,
        name: str,
        clock: Clock = SYSTEM_CLOCK,
        naming: StratumNaming = SEARCH_STRATA,
    ) -> None:
        self.access = StorageAccess(storage, name, clock, naming)
        self.reader = TrialReader(self.access)
        self.claims = Claims(self.access, self.reader)
        self.liveness = Liveness(self.access)
        self.tuning = TunerState(self.access)
        self.notes = StudyNotes(self.access, self.require)

    @property
    def storage(self) -> optuna.storages.BaseStorage:
        """The Optuna storage the ledger is on (``access.storage``)."""
        return self.access.storage

    @property
    def name(self) -> str:
        """The study's name."""
        return self.access.name

    @property
    def clock(self) -> Clock:
        """The clock heartbeats are stamped and judged by (``access.clock``)."""
        return self.access.clock

    @classmethod
    def open(
        cls,
        url: str | None,
        name: str,
        *,
        create: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        retry: float | None = None,
    ) -> Ledger:
        """The ledger of study ``name`` in the storage at ``url`` (see `open_storage`;
        ``create=False`` for read-only use; ``retry``: the window in seconds through which a
        database that does not answer is waited for). A database storage is wrapped in
        Optuna's trial cache (as Optuna's own studies are): a finished trial is read from the
        database once per process, so reading a stratum costs its open and new trials."""
        return cls(open_storage(url, create=create, retry=retry, now=clock.now), name, clock)

    def sibling(self, name: str) -> Ledger:
        """The ledger of study ``name`` in this ledger's storage (read it with `require`
        first: it may not exist)."""
        return Ledger(self.storage, name, self.clock)

    def record(self) -> StudyRecord | None:
        """The study's record, or None if no study of this name is stored."""
        attrs = self.access.study_attrs(self.name)
        return None if attrs is None else StudyRecord.from_attrs(self.name, attrs)

    def require(self) -> StudyRecord:
        """The study's record; `StudyNotFound` (a `UsageError`) naming the fix if there is
        none."""
        record = self.record()
        if record is None or (not record.config_text and not record.imported):
            raise StudyNotFound(self.name)
        return record

    def create(self, record: StudyRecord) -> StudyRecord:
        """Create the study with ``record`` unless it exists; return the stored record.

        An existing study is left as it is (nothing is written), so a caller can compare the
        stored record with its own before anything changes.
        """
        if self.record() is None:
            study = optuna.create_study(
                storage=self.storage, study_name=self.name, load_if_exists=True
            )
            stored = study.user_attrs
            attrs = {k: v for k, v in record.to_attrs().items() if k not in stored}
            batch.write_study(self.storage, id_of_study(study), attrs)  # one write
        stored = self.record()
        assert stored is not None
        return stored

    def set_trials_total(self, total: int) -> None:
        self.storage.set_study_user_attr(self.access.study_id(self.name), "trials_total", total)

    def delete(self) -> None:
        """Delete the study, all its strata, its schedule trials (`schedule_trials`) and its
        adaptive allocation's round claims (`StudyNotes.claim_round`)."""
        # schedule trials (`study.ext.schedules.ledger.PREFIX`) go with the study, loaded or not
        prefix, scheduled = f"{self.name}/", f"schedule:{self.name}/"
        claims = self.notes.round_claims()
        names = [s.study_name for s in self.storage.get_all_studies()]
        strata = sorted((n for n in names if n.startswith((prefix, scheduled))), reverse=True)
        for name in [*strata, *claims, self.name]:
            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=name, storage=self.storage)
        self.access.forget_studies()

    def summary(self) -> StudySummary:
        """Trials done of total, per-stratum counts and bests, and the study's state.

        Raises:
            UsageError: no study of this name is stored.
        """
        record = self.require()
        trials = {stratum: self.trials(stratum) for stratum in self.strata()}
        return summarize(record, trials, self.liveness.alive, self.notes.allocation())

    # -- the parts' methods, as the ledger's own --------------------------------------------
    def recent(self) -> contextlib.AbstractContextManager[None]:
        """See `StorageAccess.recent`."""
        return self.access.recent()

    def claim(self, stratum: Stratum, budget: int, *, grace: float | None = None) -> Slot | None:
        """See `Claims.claim`."""
        return self.claims.claim(stratum, budget, grace=grace)

    def start(
        self, slot: Slot, *, tuner: str, origin: Origin, extras: Mapping[str, Any] | None = None
    ) -> LedgerTrial:
        """See `Claims.start`."""
        return self.claims.start(slot, tuner=tuner, origin=origin, extras=extras)

    def finish(
        self,
        slot: Slot,
        result: TrialResult,
        objective: float,
        *,
        target: Target | None = None,
        meaning: str | None = None,
    ) -> LedgerTrial:
        """See `Claims.finish`."""
        return self.claims.finish(slot, result, objective, target=target, meaning=meaning)

    def fail(self, slot: Slot, error: str) -> LedgerTrial:
        """See `Claims.fail`."""
        return self.claims.fail(slot, error)

    def interrupt(self, slot: Slot) -> None:
        """See `Claims.interrupt`."""
        self.claims.interrupt(slot)

    def import_trials(self, stratum: Stratum, trials: Sequence[LedgerTrial]) -> None:
        """See `Claims.import_trials`."""
        self.claims.import_trials(stratum, trials)

    def strata(self) -> list[Stratum]:
        """See `TrialReader.strata`."""
        return self.reader.strata()

    def trials(self, stratum: Stratum) -> list[LedgerTrial]:
        """See `TrialReader.trials`."""
        return self.reader.trials(stratum)

    def fresh_trials(self, stratum: Stratum) -> list[LedgerTrial]:
        """See `TrialReader.fresh_trials`."""
        return self.reader.fresh_trials(stratum)

    def trial(self, stratum: Stratum, number: int) -> LedgerTrial:
        """See `TrialReader.trial`."""
        return self.reader.trial(stratum, number)

    def counted(self, stratum: Stratum) -> list[LedgerTrial]:
        """See `TrialReader.counted`."""
        return self.reader.counted(stratum)

    def taken(self, stratum: Stratum, budget: int) -> int:
        """See `TrialReader.taken`."""
        return self.reader.taken(stratum, budget)

    def remaining(self, stratum: Stratum, budget: int) -> int:
        """See `TrialReader.remaining`."""
        return self.reader.remaining(stratum, budget)

    def best(self, stratum: Stratum) -> LedgerTrial | None:
        """See `TrialReader.best`."""
        return self.reader.best(stratum)

    def measurement_rows(
        self, *, include_running: bool = True
    ) -> list[tuple[LedgerTrial, list[dict[str, Any]]]]:
        """See `TrialReader.measurement_rows`."""
        return self.reader.measurement_rows(include_running=include_running)
