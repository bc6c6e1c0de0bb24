"""Branch trials in the study's Optuna storage: the reference run's record and a queue of
branches any worker on any host can claim.

The branches of a study live in one Optuna study of their own, ``branches:NAME/tasks`` (the
``/`` keeps it out of `list_studies`; it does not start with ``NAME/``, so it is no stratum).
Its user attributes hold the plan and the reference run's record (`set_note` / `note`, JSON).
Each branch is an Optuna trial enqueued as WAITING with its task as a user attribute; a
worker claims one with ``Study.ask``, which takes a waiting trial atomically (on a journal file
and on an RDB alike), so two workers never run the same branch. A finished branch holds its
outcome as a user attribute and is COMPLETE with its validation loss as value.

The first process to create the study (`begin`) runs the reference; the others wait for its
record and then claim branches like it. A claimed branch carries its owner and a stamp
(`Beat`, good for `GRACE_S`, renewed by `beat` while it runs); `recover` queues again a branch whose owner died (on this host:
its process is gone; elsewhere: its stamp is older than the grace) and closes the dead one.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import id_of_trial
from study.ledger.owners import Beat, owner_alive, owner_id
from study.ledger.storage import open_storage

__all__ = ["TASK_KEY", "BranchLedger", "BranchTask"]

TASK = "branch_task"
OUTCOME = "branch_outcome"
ERROR = "branch_error"
OWNER = "branch_owner"
BEAT = "branch_beat"
#: Seconds a claimed branch may run before a process on another host may take it for dead.
GRACE_S = 900.0
#: What makes two branches the same branch.
TASK_KEY = ("checkpoint", "batch_size", "replicate", "lr_factor")


@dataclass(frozen=True)
class BranchTask:
    """One branch in the ledger: its trial ``number``, its state (``waiting``, ``running``,
    ``complete``, ``failed``), the task as enqueued and its outcome once finished."""

    number: int
    state: str
    task: Mapping[str, Any]
    outcome: Mapping[str, Any] | None = None
    error: str | None = None


class BranchLedger:
    """The branch trials of study ``name`` in an Optuna storage (see the module docstring)."""

    def __init__(self, storage: optuna.storages.BaseStorage, name: str) -> None:
        self.storage = storage
        self.name = name
        self.study_name = f"branches:{name}/tasks"
        self._study: optuna.Study | None = None

    @classmethod
    def of(cls, ledger: Any) -> BranchLedger:
        """The branches of the study a `Ledger` holds, in its storage."""
        return cls(ledger.storage, ledger.name)

    @classmethod
    def open(cls, url: str | None, name: str, *, retry: float | None = None) -> BranchLedger:
        return cls(open_storage(url, create=True, retry=retry), name)

    # -- the study of the branches -----------------------------------------------------------
    def begin(self) -> bool:
        """Create the branches' study; True for the one process that did (it runs the
        reference), False when it existed."""
        try:
            self.storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], self.study_name)
        except optuna.exceptions.DuplicatedStudyError:
            return False
        return True

    def exists(self) -> bool:
        try:
            self.storage.get_study_id_from_name(self.study_name)
        except KeyError:
            return False
        return True

    def delete(self) -> None:
        """Forget every branch and the reference's record (a fresh ``study branch``)."""
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=self.study_name, storage=self.storage)
        self._study = None

    def _optuna(self) -> optuna.Study:
        if self._study is None:
            self._study = optuna.load_study(study_name=self.study_name, storage=self.storage)
        return self._study

    def _id(self) -> int:
        return self.storage.get_study_id_from_name(self.study_name)

    def set_note(self, key: str, value: Any) -> None:
        """Store a JSON value under ``key`` (the plan, the reference's record)."""
        self.storage.set_study_user_attr(self._id(), key, json.dumps(value, allow_nan=True))

    def note(self, key: str) -> Any:
        """The value stored under ``key``, or None (also when there is no study of branches)."""
        try:
            raw = self.storage.get_study_user_attrs(self._id()).get(key)
        except KeyError:
            return None
        return json.loads(raw) if raw else None

    # -- branches ----------------------------------------------------------------------------
    def enqueue(self, tasks: list[Mapping[str, Any]]) -> None:
        """Queue branches (each a JSON-able mapping) for any worker to claim."""
        study = self._optuna()
        for task in tasks:
            study.enqueue_trial({}, user_attrs={TASK: json.dumps(dict(task))})

    def enqueue_new(self, tasks: list[Mapping[str, Any]], key: tuple[str, ...] = TASK_KEY) -> int:
        """Queue the ``tasks`` that no waiting, running or finished branch holds already (the
        same ``key`` fields); how many. Two processes adding the same round at once may both
        queue a task; the analysis counts one (`study.ext.branch.report.branch_frames`)."""
        live = (OptunaState.WAITING, OptunaState.RUNNING, OptunaState.COMPLETE)
        held = set()
        for t in self._frozen(live):
            raw = t.user_attrs.get(TASK)
            if raw is not None:
                held.add(_key(json.loads(raw), key))
        fresh = [task for task in tasks if _key(task, key) not in held]
        self.enqueue(fresh)
        return len(fresh)

    def waiting(self) -> int:
        return len(self._frozen((OptunaState.WAITING,)))

    def running(self) -> int:
        return len(self._frozen((OptunaState.RUNNING,)))

    def claim(self) -> tuple[optuna.Trial, dict[str, Any]] | None:
        """Take a waiting branch (atomically); None when none is waiting."""
        if not self.waiting():
            return None
        study = self._optuna()
        trial = study.ask()
        raw = trial.user_attrs.get(TASK)
        if raw is None:  # another worker took the last one first: this trial is no branch
            study.tell(trial, state=OptunaState.FAIL)
            return None
        trial.set_user_attr(OWNER, owner_id())
        trial.set_user_attr(BEAT, json.dumps(Beat(time.time(), GRACE_S).to_stored()))
        return trial, json.loads(raw)

    def beat(self, trial: optuna.Trial) -> None:
        """Stamp a claimed branch again (its owner lives: another `GRACE_S` before a peer may
        take it for dead)."""
        trial.set_user_attr(BEAT, json.dumps(Beat(time.time(), GRACE_S).to_stored()))

    def recover(self) -> int:
        """Queue again every running branch whose owner died, closing the dead one as failed;
        how many. Two processes recovering at once queue each one once (closing it is the
        claim: the second finds it finished)."""
        recovered = 0
        for t in self._frozen((OptunaState.RUNNING,)):
            raw = t.user_attrs.get(TASK)
            stamp = t.user_attrs.get(BEAT)
            beat = Beat.from_stored(json.loads(stamp)) if stamp else None
            if raw is None or owner_alive(t.user_attrs.get(OWNER), beat):
                continue
            try:
                self.storage.set_trial_user_attr(
                    id_of_trial(t), ERROR, "its process died; queued again"
                )
                self.storage.set_trial_state_values(id_of_trial(t), OptunaState.FAIL)
            except (RuntimeError, ValueError):  # finished meanwhile (by its owner or a peer)
                continue
            self._optuna().enqueue_trial({}, user_attrs={TASK: raw})
            recovered += 1
        return recovered

    def finish(self, trial: optuna.Trial, outcome: Mapping[str, Any], value: float) -> None:
        """Record a branch's outcome and close it COMPLETE with ``value``."""
        trial.set_user_attr(OUTCOME, json.dumps(dict(outcome), allow_nan=True))
        study = self._optuna()
        if value == value and abs(value) != float("inf"):
            study.tell(trial, value)
        else:
            trial.set_user_attr(ERROR, "the branch diverged")
            study.tell(trial, state=OptunaState.FAIL)

    def fail(self, trial: optuna.Trial, error: str) -> None:
        trial.set_user_attr(ERROR, error[:2000])
        self._optuna().tell(trial, state=OptunaState.FAIL)

    def tasks(self) -> list[BranchTask]:
        """Every branch, in number order."""
        out = []
        for t in self._frozen(None):
            raw = t.user_attrs.get(TASK)
            if raw is None:
                continue
            outcome = t.user_attrs.get(OUTCOME)
            out.append(
                BranchTask(
                    number=t.number,
                    state=t.state.name.lower(),
                    task=json.loads(raw),
                    outcome=json.loads(outcome) if outcome else None,
                    error=t.user_attrs.get(ERROR),
                )
            )
        return out

    def _frozen(self, states: tuple[OptunaState, ...] | None) -> list[optuna.trial.FrozenTrial]:
        try:
            study_id = self._id()
        except KeyError:
            return []
        return self.storage.get_all_trials(study_id, deepcopy=False, states=states)


def _key(task: Mapping[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(task.get(f) for f in fields)
