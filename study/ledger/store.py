"""The ledger: one study's trials in an Optuna storage, behind typed methods, by job.

Layout in the storage: a root Optuna study named after the study (its attributes: a
`StudyRecord` and the study's notes) and one Optuna study per stratum, named
``NAME/b{batch}/{strategy}``, whose trials are the stratum's trials (attributes encoded by
`study.ledger.records`).

`Ledger` is the study's record (create, read, delete, summarise) and its trials (`claims`:
claim a slot, record it, read trials back); its parts do the rest, each one job:

- ``ledger.liveness`` (`liveness.Liveness`): heartbeats, live owners, recovering the trials
  of processes that died;
- ``ledger.tuning`` (`tuning.TunerState`): the sampler, learning-rate windows, params chosen
  outside the sampler, reserved points;
- ``ledger.notes`` (`study_notes.StudyNotes`): the pilot, the throughput probe and the
  adaptive allocation's state and round claims (typed in `notes`).

The parts share one `access.StorageAccess` and its clock (`clock.SYSTEM_CLOCK` unless one is
given: a test passes a fake). Only the ledger package touches the storage; everything else
reads `LedgerTrial` records and the typed notes.
"""

from __future__ import annotations

import contextlib

import optuna

from study.adapters.optuna_internals import id_of_study
from study.errors import StudyNotFound
from study.ledger import batch
from study.ledger.access import Slot
from study.ledger.claims import Claims
from study.ledger.clock import SYSTEM_CLOCK, Clock
from study.ledger.liveness import Liveness
from study.ledger.records import StudyRecord
from study.ledger.storage import open_storage
from study.ledger.study_notes import StudyNotes
from study.ledger.summary import StudySummary, summarize
from study.ledger.tuning import TunerState

optuna.logging.set_verbosity(optuna.logging.WARNING)

__all__ = ["Ledger", "Slot"]


class Ledger(Claims):
    """One study's record and trials in an Optuna storage, and its parts (see the module
    docstring)."""

    def __init__(
        self, storage: optuna.storages.BaseStorage, name: str, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        super().__init__(storage, name, clock)
        self.liveness = Liveness(self)
        self.tuning = TunerState(self)
        self.notes = StudyNotes(self, self.require)

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

    def record(self) -> StudyRecord | None:
        """The study's record, or None if no study of this name is stored."""
        attrs = self.study_attrs(self.name)
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
        self.storage.set_study_user_attr(self.study_id(self.name), "trials_total", total)

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
        self.studies.clear()
        self.ids.clear()

    def summary(self) -> StudySummary:
        """Trials done of total, per-stratum counts and bests, and the study's state.

        Raises:
            UsageError: no study of this name is stored.
        """
        record = self.require()
        trials = {stratum: self.trials(stratum) for stratum in self.strata()}
        return summarize(record, trials, self.liveness.alive, self.notes.allocation())
