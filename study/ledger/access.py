"""How the ledger reaches its Optuna storage: study and trial ids, the stratum studies (with
the sampler the Optuna backend installs), the claimed `Slot`, and decoding stored trials.
Every part of a `Ledger` (`reading`, `claims`, `liveness`, `tuning`, `study_notes`) is given
one `StorageAccess`, which also holds the clock they read and the `StratumNaming` of the
strata; nothing outside the ledger package uses it.

What this process knows beyond the storage (the writes it holds, the trials it claimed and
wrote, its last read of each stratum, its heartbeat stamps) is kept inside `StorageAccess`
and reached only through its methods."""

from __future__ import annotations

import contextlib
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import (
    METRIC_NAMES_KEY,
    id_of_study,
    id_of_trial,
    trial_id_or_none,
)
from study.config.space import Stratum
from study.ledger import batch, records
from study.ledger.batch import TrialWrites
from study.ledger.clock import SYSTEM_CLOCK, Clock
from study.ledger.naming import SEARCH_STRATA, StratumNaming
from study.ledger.reads import KeptReads
from study.ledger.records import LedgerTrial, decode_trial, merge_stored
from study.ledger.sampler_storage import SamplerStorage
from study.results import TrialState

#: What a stratum's objective value is, for Optuna users (the study's metric name).
METRIC_NAME = "steps_to_target"
#: What its values mean (a stratum study attribute).
OBJECTIVE_MEANING = (
    "steps to the target (fewer is better); a trial that never reached it scores "
    "2 x step limit x (1 + its final shortfall from the target), a diverged or failed one "
    "5 x step limit, so both rank below every trial that reached it; a pruned trial's value is "
    "the steps it ran (it needs more); intermediate values are the distance to the target "
    "(fewer is better, <= 0 once met), the target metric itself is the user attribute "
    "target_curve"
)


#: How long a stratum read serves the readers inside `StorageAccess.recent`, in seconds.
RECENT_S = 10.0
#: A stratum read younger than this counts as fresh (`StorageAccess.fresh`), in seconds: what
#: must be read afresh (a budget that looks spent, the open trials a waiting worker watches) is
#: not read twice within it.
FRESH_S = 1.0


#: Study ids by name, per database this process opened (`_known_ids`).
_IDS: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()
_IDS_LOCK = threading.Lock()


def _known_ids(storage: optuna.storages.BaseStorage) -> dict[str, int]:
    """The study ids this process knows of in ``storage``'s database (one dict for every
    ledger on it: `study.ledger.storage.open_database` opens a database once); a new dict
    for any other storage."""
    rdb = batch.rdb_of(storage)
    if rdb is None:
        return {}
    with _IDS_LOCK:
        return _IDS.setdefault(rdb, {})


@dataclass(frozen=True)
class Slot:
    """A claimed place in a stratum's budget: the trial about to run.

    ``trial`` is the Optuna trial behind it; only the Optuna backend samples on it.
    """

    stratum: Stratum
    number: int
    owner: str
    trial: Any = field(compare=False, repr=False)


class StorageAccess:
    """One study's studies and trials in an Optuna storage, by stratum (named by ``naming``),
    and the ``clock`` its heartbeats are stamped and judged by."""

    def __init__(
        self,
        storage: optuna.storages.BaseStorage,
        name: str,
        clock: Clock = SYSTEM_CLOCK,
        naming: StratumNaming = SEARCH_STRATA,
    ) -> None:
        self.storage = storage
        self.name = name
        self.clock = clock
        self.naming = naming
        self._studies: dict[Stratum, optuna.Study] = {}
        self._sampler_for: Callable[[Stratum], Any] | None = None
        self._lock = threading.Lock()
        #: Study ids by name (a study's id never changes while it exists), shared by the
        #: ledgers of this process on one database (`_known_ids`).
        self._ids: dict[str, int] = _known_ids(storage)
        #: Writes held until the next write of their trial (`hold`, `flush`), and the trials
        #: this process claimed as it wrote them (`mine`: no read of its own writes back).
        self._pending: dict[int, TrialWrites] = {}
        self._written: dict[int, FrozenTrial] = {}
        self._writes_lock = threading.Lock()
        #: The last read of each stratum (monotonic time, trials), for readers inside `recent`.
        self._reads: KeptReads[Stratum] = KeptReads(id_of_trial)
        self._strata_of: dict[int, Stratum] = {}
        #: Strata studies known to carry their attributes (`study` need not check them).
        self._labelled: set[str] = set()
        #: When `learn_studies` last read every study (monotonic time).
        self._learnt_at = -math.inf
        #: When this process last stamped each of its running trials (`Liveness.beat`).
        self._stamped: dict[int, float] = {}
        self._local = threading.local()
        #: Closed trials decoded, by trial id, with the stored object they came from (`decode`).
        self._decoded: dict[int, tuple[FrozenTrial, LedgerTrial]] = {}
        #: Each stratum's last list of stored trials and its decoding (`decode_all`).
        self._decoded_lists: dict[Stratum, tuple[list[FrozenTrial], list[LedgerTrial]]] = {}
        self._sampler_storage = SamplerStorage(self)

    def use_sampler(self, sampler_for: Callable[[Stratum], Any]) -> None:
        """Give the stratum studies loaded from now on the sampler ``sampler_for(stratum)``."""
        self._sampler_for = sampler_for

    def forget_studies(self) -> None:
        """Forget the studies loaded and the ids learnt (the study was deleted)."""
        self._studies.clear()
        self._ids.clear()

    # -- what this process claimed and stamped ------------------------------------------------
    def track(self, trial_id: int, stratum: Stratum) -> None:
        """This process created the trial ``trial_id`` in ``stratum``: its writes keep the
        stratum's last read up to date (`changed`, and closing it through `flush`)."""
        self._strata_of[trial_id] = stratum

    def wrote(self, frozen: FrozenTrial) -> None:
        """This process claimed ``frozen`` and wrote it as it now is: `flush` and `mine` give
        it without reading it back."""
        with self._writes_lock:
            self._written[id_of_trial(frozen)] = frozen

    def stamped_at(self, trial_id: int) -> float | None:
        """When this process last stamped the trial ``trial_id`` with a heartbeat (its clock's
        time), or None."""
        return self._stamped.get(trial_id)

    def note_stamp(self, trial_id: int, at: float) -> None:
        """This process stamped the trial ``trial_id`` with a heartbeat at ``at``."""
        self._stamped[trial_id] = at

    @contextlib.contextmanager
    def recent(self) -> Iterator[None]:
        """Within this block (in this thread), a stratum read less than `RECENT_S` ago is not
        read again: what a trial's set-up reads (its stratum, the other batch sizes, the
        points taken, the sampler's history through `SamplerStorage`) a few times within
        moments. The reads that must be fresh come right after a claim or a reservation of
        this process, which drop the stratum's read (`changed`), so they read the storage."""
        depth = getattr(self._local, "recent", 0)
        self._local.recent = depth + 1
        try:
            yield
        finally:
            self._local.recent = depth

    def in_recent(self) -> bool:
        """Whether this thread is inside `recent`."""
        return bool(getattr(self._local, "recent", 0))

    def recent_stratum(self, study_id: int) -> Stratum | None:
        """The stratum of the study ``study_id`` if it is loaded and this thread is inside
        `recent` (else None)."""
        if not self.in_recent():
            return None
        loaded = list(self._studies.items())
        return next((s for s, study in loaded if id_of_study(study) == study_id), None)

    def setting_up(self, trial_id: int) -> bool:
        """Whether this thread is setting up the trial ``trial_id``, which this process claimed
        (inside `recent`): writes to it can wait for its next write."""
        return self.in_recent() and trial_id in self._written

    def changed(self, trial_id: int) -> None:
        """This process wrote the trial ``trial_id``: its stratum is read afresh next time."""
        stratum = self._strata_of.get(trial_id)
        if stratum is not None:
            self.forget_read(stratum)

    def forget_read(self, stratum: Stratum) -> None:
        """Read ``stratum`` afresh next time (e.g. a slot of it was freed)."""
        self._reads.forget(stratum)

    def _closed(self, trial_id: int, now: FrozenTrial) -> None:
        """This process closed the trial ``trial_id`` as ``now``: its stratum's last read says
        so (no read afresh: the rest of that read is as old as it was; a claim reads afresh)."""
        stratum = self._strata_of.get(trial_id)
        if stratum is not None:
            self._reads.closed(stratum, now)

    def stratum_name(self, stratum: Stratum) -> str:
        """The Optuna study name of ``stratum`` (by the ledger's `StratumNaming`)."""
        return self.naming.name(self.name, stratum)

    def study(self, stratum: Stratum) -> optuna.Study:
        with self._lock:
            study = self._studies.get(stratum)
            if study is None:
                sampler = self._sampler_for(stratum) if self._sampler_for else None
                name = self.stratum_name(stratum)
                try:  # loading writes nothing; creating only when missing
                    study = optuna.load_study(
                        study_name=name, storage=self._sampler_storage, sampler=sampler
                    )
                except KeyError:
                    study = optuna.create_study(
                        storage=self._sampler_storage,
                        study_name=name,
                        direction="minimize",
                        sampler=sampler,
                        load_if_exists=True,
                    )
                labelled = name in self._labelled
                if not labelled and "batch_size" not in study.user_attrs:  # what Optuna shows
                    attrs = {
                        "batch_size": stratum.batch_size,
                        "strategy": stratum.strategy,
                        records.OBJECTIVE: OBJECTIVE_MEANING,
                    }
                    names = {METRIC_NAMES_KEY: [METRIC_NAME]}  # as `Study.set_metric_names`
                    batch.write_study(self.storage, id_of_study(study), attrs, names)  # one write
                self._labelled.add(name)
                self._studies[stratum] = study
                self._ids[name] = id_of_study(study)  # (re)loaded: e.g. made again after a delete
                self.forget_read(stratum)
            return study

    def study_id(self, name: str) -> int:
        """The id of the study ``name`` (the study's and its strata's are looked up once per
        process and database).

        Raises:
            KeyError: no study of that name is stored.
        """
        known = self._ids.get(name)
        if known is not None:
            return known
        if name.startswith(f"{self.name}/"):  # a stratum: learn every stratum's id at once
            self.learn_studies()
            if name not in self._ids:
                raise KeyError(name)
            return self._ids[name]
        study_id = self.storage.get_study_id_from_name(name)
        if name == self.name:
            self._ids[name] = study_id
        return study_id

    def learn_studies(self) -> list[optuna.study.StudySummary | Any]:
        """Read every study of the storage (one read); note the ids of this study and its
        strata, and which strata carry their attributes already. Returns them."""
        studies = self.storage.get_all_studies()
        self._learnt_at = time.monotonic()
        for study in studies:
            name = study.study_name
            if name == self.name or name.startswith(f"{self.name}/"):
                self._ids.setdefault(name, id_of_study(study))
                if "batch_size" in study.user_attrs:
                    self._labelled.add(name)
        return studies

    # -- writing a trial: held writes, one transaction per group (`batch`) -------------------
    def hold(self, writes: TrialWrites) -> None:
        """Keep ``writes`` for the next `flush` of their trial (nothing is written now)."""
        with self._writes_lock:
            held = self._pending.setdefault(writes.trial_id, TrialWrites(writes.trial_id))
            held.merge(writes)

    def flush(self, writes: TrialWrites) -> FrozenTrial | None:
        """Store the trial's held writes and ``writes`` in one transaction (`batch.write`);
        return the trial as it now reads if this process claimed it (else None).

        Raises:
            optuna.exceptions.UpdateFinishedTrialError: the trial is closed already.
        """
        trial_id = writes.trial_id
        with self._writes_lock:
            group = self._pending.pop(trial_id, None) or TrialWrites(trial_id)
        group.merge(writes)
        try:
            batch.write(self.storage, group)
        except BaseException:
            with self._writes_lock:
                if writes.state is None:
                    self._pending.setdefault(trial_id, TrialWrites(trial_id)).merge(group)
            raise
        with self._writes_lock:
            mine = self._written.get(trial_id)
            if mine is None:
                return None
            now = group.applied_to(mine)
            if now.state.is_finished():
                self._closed(trial_id, now)  # this process reads its closed trial as closed
                self._strata_of.pop(trial_id, None)
                self._stamped.pop(trial_id, None)
                del self._written[trial_id]
            else:
                self._written[trial_id] = now
            return now

    def mine(self, slot: Slot) -> FrozenTrial:
        """The slot's trial as this process wrote it (held writes included), without a read;
        read from the storage if this process did not claim it."""
        trial_id = self.slot_id(slot)
        with self._writes_lock:
            mine = self._written.get(trial_id)
            held = self._pending.get(trial_id)
        if mine is None:
            mine = self.storage.get_trial(trial_id)
        return held.applied_to(mine) if held else mine

    def study_attrs(self, name: str) -> dict[str, Any] | None:
        for _ in range(2):
            known = name in self._ids
            try:
                return self.storage.get_study_user_attrs(self.study_id(name))
            except KeyError:
                if not known:
                    return None
                self._ids.pop(name, None)  # deleted (and maybe made again) elsewhere
        return None

    def frozen(self, stratum: Stratum) -> list[FrozenTrial]:
        now = time.monotonic()
        last = self._reads.get(stratum) if self.in_recent() else None
        if last is not None and now - last[0] <= RECENT_S:
            return self.with_held(last[1])
        name = self.stratum_name(stratum)
        if self.in_recent() and name not in self._ids and now - self._learnt_at <= RECENT_S:
            return []  # not made when every study was read, less than RECENT_S ago
        try:
            study_id = self.study_id(name)
        except KeyError:
            return []
        generation = self._reads.generation(stratum)
        trials = self.storage.get_all_trials(study_id, deepcopy=False)
        # Not kept if this process closed a trial of it meanwhile: it would read as running.
        self._reads.keep(stratum, generation, now, trials)
        return self.with_held(trials)

    def with_held(self, trials: list[FrozenTrial]) -> list[FrozenTrial]:
        """``trials`` with the writes held for any of them applied (this process reads what
        it wrote)."""
        with self._writes_lock:
            if not self._pending:
                return trials
            held = dict(self._pending)
        return [held[id_of_trial(t)].applied_to(t) if id_of_trial(t) in held else t for t in trials]

    def fresh(self, stratum: Stratum) -> list[FrozenTrial] | None:
        """The stratum's trials as read less than `FRESH_S` ago (held writes applied), or
        None."""
        last = self._reads.get(stratum)
        if last is None or time.monotonic() - last[0] > FRESH_S:
            return None
        return self.with_held(last[1])

    def open_frozen(self, stratum: Stratum) -> list[FrozenTrial]:
        """The stratum's trials still open in the storage (reads only those; none inside
        `recent`, which reads the whole stratum once, nor after a `fresh` read)."""
        known = self.fresh(stratum)
        if known is None and self.in_recent():
            known = self.frozen(stratum)
        if known is not None:
            return [t for t in known if t.state is OptunaState.RUNNING]
        try:
            study_id = self.study_id(self.stratum_name(stratum))
        except KeyError:
            return []
        return self.storage.get_all_trials(study_id, deepcopy=False, states=(OptunaState.RUNNING,))

    def trial_id(self, stratum: Stratum, number: int) -> int:
        study_id = self.study_id(self.stratum_name(stratum))
        return self.storage.get_trial_id_from_study_id_trial_number(study_id, number)

    def slot_id(self, slot: Slot) -> int:
        """The storage id of the slot's trial (kept by its Optuna trial: no lookup)."""
        trial_id = trial_id_or_none(slot.trial)
        return trial_id if trial_id is not None else self.trial_id(slot.stratum, slot.number)

    @staticmethod
    def status(frozen: FrozenTrial) -> TrialState:
        return TrialState(frozen.user_attrs.get(records.STATUS, TrialState.RUNNING.value))

    def decode(self, stratum: Stratum, frozen: FrozenTrial) -> LedgerTrial:
        """The stored trial as a `LedgerTrial`. A closed trial never changes (Optuna refuses
        writes to it), so one read again as the very same object (what the storages give
        without a deep copy) is decoded once: a study's decisions read every trial again at
        every trial, and decoding them all each time would cost the square of the trials."""
        closed = frozen.state.is_finished()
        if closed:
            known = self._decoded.get(id_of_trial(frozen))
            if known is not None and known[0] is frozen and known[1].stratum == stratum:
                return known[1]
        decoded = self._decode_now(stratum, frozen)
        if closed:
            self._decoded[id_of_trial(frozen)] = (frozen, decoded)
        return decoded

    def decode_all(self, stratum: Stratum, frozen: list[FrozenTrial]) -> list[LedgerTrial]:
        """`decode` of every trial of ``frozen``; the list decoded last for the stratum again
        (a copy) when ``frozen`` is the very same list (a read inside `recent`, nothing held:
        the same trial objects, and a stored trial object never changes)."""
        kept = self._decoded_lists.get(stratum)
        if kept is not None and kept[0] is frozen:
            return list(kept[1])
        decoded = [self.decode(stratum, t) for t in frozen]
        self._decoded_lists[stratum] = (frozen, decoded)
        return list(decoded)

    @staticmethod
    def _decode_now(stratum: Stratum, frozen: FrozenTrial) -> LedgerTrial:
        started = frozen.datetime_start.timestamp() if frozen.datetime_start else None
        return decode_trial(
            stratum,
            frozen.number,
            merge_stored(frozen.user_attrs, frozen.system_attrs),
            frozen.params,
            started,
            open=frozen.state is OptunaState.RUNNING,
        )
