"""Liveness: whether the process running a trial still lives, and closing the trials of those
that died.

A claimed trial names its owner (`owners.owner_id`) and, while it runs, carries the owner's
heartbeat (`Liveness.beat`: a system attribute stamped every few seconds by the clock of the
ledger, `study.ledger.clock`). A trial still open whose owner is dead (its process gone, on its
own host; its heartbeat stale by the clock, from anywhere else) is closed as ``interrupted`` by
`Liveness.recover_stale`, and its slot runs again.

Example: a trial claimed with a grace of 60 s on host A, whose owner stops beating, is alive to
host B until B's clock reads 60 s past the last beat, and recovered by B after that. After a
storage outage that B waited through (`study.ledger.retry`), the grace runs from when the
storage answered B again: heartbeats missed while it was away do not count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import id_of_trial
from study.config.space import Stratum
from study.ledger import records
from study.ledger.access import Slot, StorageAccess
from study.ledger.batch import TrialWrites, write
from study.ledger.owners import Beat, owner_alive
from study.ledger.records import LedgerTrial
from study.results import TrialState

#: A claimed trial that has no owner yet is left alone for this long (it is being set up).
SETUP_GRACE_S = 60.0
#: How long the open trials `Liveness.recover_stale` read answer this thread's next
#: `Liveness.running`, in seconds.
REUSE_S = 1.0
#: Optuna's state of a recovered trial.
FAIL = OptunaState.FAIL
#: The system attribute holding a running trial's last heartbeat (`owners.Beat`).
HEARTBEAT = "study:heartbeat"


def stamp(access: StorageAccess, trial_id: int, grace: float) -> None:
    """Stamp the trial ``trial_id`` with a heartbeat at ``access.clock.now()``.

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial is closed already.
    """
    beat = Beat(access.clock.now(), grace)
    access.storage.set_trial_system_attr(trial_id, HEARTBEAT, beat.to_stored())


class Liveness:
    """Heartbeats, live owners and stale trials of one study (see the module docstring)."""

    def __init__(self, access: StorageAccess) -> None:
        self._access = access
        self._local = threading.local()

    def beat(self, slot: Slot, grace: float) -> bool:
        """Stamp the slot's running trial with a heartbeat: its owner promises another one
        within ``grace`` seconds. False if the trial is closed already (e.g. another process
        took it for dead and closed it as interrupted).

        A trial this process stamped less than a quarter of ``grace`` ago is left as it is
        (one write fewer): with stamps due every heartbeat interval, at most half the grace,
        the next stamp still comes well within the grace of the last one.
        """
        trial_id = self._access.slot_id(slot)
        now = self._access.clock.now()
        last = self._access.stamped_at(trial_id)
        if last is not None and 0 <= now - last < grace / 4:
            return True
        try:
            stamp(self._access, trial_id, grace)
        except optuna.exceptions.UpdateFinishedTrialError:
            return False
        self._access.note_stamp(trial_id, now)
        return True

    def recover_stale(self, strata: Sequence[Stratum]) -> list[LedgerTrial]:
        """Close trials whose owner died (`alive`) as ``interrupted`` (failed in Optuna, one
        write each), so their slots run again; return them. A trial another process closed
        first is skipped. What it read stays good for this thread's next `running` within
        `REUSE_S` (a waiting worker asks both every poll)."""
        access = self._access
        stale = []
        for stratum in strata:
            still_open = []
            for frozen in access.open_frozen(stratum):
                t = access.decode(stratum, frozen)
                setting_up = (
                    t.owner is None
                    and t.started_at is not None
                    and access.clock.now() - t.started_at < SETUP_GRACE_S
                )
                if setting_up or self._owner_alive(frozen):
                    still_open.append(frozen)
                    continue
                interrupted = {records.STATUS: TrialState.INTERRUPTED.value}
                try:
                    write(
                        access.storage,
                        TrialWrites(id_of_trial(frozen), user=interrupted, state=FAIL),
                    )
                except optuna.exceptions.UpdateFinishedTrialError:
                    continue  # its owner finished it, or another process recovered it
                access.forget_read(stratum)  # its slot is free: read afresh
                stale.append(t)
            self._seen_open()[stratum] = (time.monotonic(), still_open)
        return stale

    def running(self, strata: Sequence[Stratum]) -> list[LedgerTrial]:
        """Trials of ``strata`` still open in the storage, whatever their owner's fate (reads
        only the open ones, unless `recover_stale` just read them in this thread)."""
        access, seen, now = self._access, self._seen_open(), time.monotonic()
        found = []
        for stratum in strata:
            last = seen.pop(stratum, None)
            fresh = last is not None and now - last[0] <= REUSE_S
            opened = last[1] if fresh and last is not None else access.open_frozen(stratum)
            found += [access.decode(stratum, f) for f in opened]
        return found

    def _seen_open(self) -> dict[Stratum, tuple[float, list[FrozenTrial]]]:
        """The open trials `recover_stale` last read in this thread, by stratum."""
        if not hasattr(self._local, "open"):
            self._local.open = {}
        return self._local.open

    def alive(self, trial: LedgerTrial) -> bool:
        """Whether a trial is running in a live process: on the owner's host, its process
        exists; elsewhere, its heartbeat is fresh (see `owners.owner_alive`)."""
        if not trial.open:
            return False
        frozen = self._frozen(trial)
        return frozen.state is OptunaState.RUNNING and self._owner_alive(frozen)

    def owner_alive(self, trial: LedgerTrial) -> bool:
        """Whether the process that ran a trial (finished or not) still lives: it may still be
        logging the trial to MLflow (its heartbeat is fresh, or on this host its process runs)."""
        return self._owner_alive(self._frozen(trial))

    def _frozen(self, trial: LedgerTrial) -> FrozenTrial:
        access = self._access
        return access.storage.get_trial(access.trial_id(trial.stratum, trial.number))

    def _owner_alive(self, frozen: FrozenTrial) -> bool:
        beat = Beat.from_stored(frozen.system_attrs.get(HEARTBEAT))
        back = getattr(self._access.storage, "back_at", 0.0)  # `study.ledger.retry`
        if beat is not None and back > beat.at:
            # The storage was away until ``back``: no owner could stamp, so the grace runs
            # from when it answered again.
            beat = Beat(back, beat.grace)
        return owner_alive(frozen.user_attrs.get(records.OWNER), beat, self._access.clock.now())
