"""Writes that can tell, on a retry, whether their first attempt landed.

A write whose commit landed but whose answer was lost (the connection dropped after the commit)
looks, to the caller, like one that never landed. `study.ledger.retry.RetryingStorage` retries
it; for the three writes that are not the same when done twice it first asks whether the first
attempt landed, by a token (a random hex string, one per call) written in the same transaction:

- creating a study: the study's system attribute `CREATED_BY` holds the token, so a retry that
  finds the name taken knows whether it was this call (done, its id) or another process
  (`DuplicatedStudyError`: of processes creating one name at once exactly one wins, which
  ``claim_round`` and a branch reference rely on); a study without a name gets one from the
  caller (Optuna's prefix and a fresh UUID), so a retry finds the same study;
- creating a trial: the trial's system attribute `CREATED_BY` holds the token, so a retry finds
  the trial the first attempt made instead of making a second;
- changing a trial's state (taking a waiting trial, WAITING -> RUNNING, or finishing it): the
  system attribute `STATE_BY` holds the token, so a retry that finds the trial in that state
  knows whether this call put it there (True) or another process did (taking it: False;
  finishing it: `UpdateFinishedTrialError`, as when the other finished it first).

The tokens are Optuna system attributes, `HIDDEN` from every read through the retry wrapper
(`hide_study`, `hide_trial`): Optuna's storage contract (what a study or trial holds) is kept.
`create_study` and `set_state` are one transaction on an Optuna RDB storage; a
``study serve-storage`` proxy runs them at the database (its client's ``once``). `LedgerRDB` is
Optuna's RDB storage with one change: creating a trial is one attempt (Optuna's own retries a
failed commit up to five times, and one whose commit landed made a twin of the trial).

Example: ``create_study(rdb, [MINIMIZE], "s", "ab12")`` creates ``s`` marked ``ab12``;
``study_created(storage, "s", "ab12")`` then returns its id, with another token raises
`DuplicatedStudyError`.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.storages import BaseStorage, RDBStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import (
    DEFAULT_STUDY_NAME_PREFIX,
    CreateTrialOnce,
    id_of_trial,
    rdb_models,
    rdb_session,
    running_template,
    set_attr_in,
    set_value_in,
)
from study.ledger.batch import WRITE_TRIAL, closed_as

#: The system attribute of a study or trial naming the call that created it (its token).
CREATED_BY = "study:created_by"
#: The system attribute of a trial naming the call that last changed its state (took it from
#: WAITING to RUNNING, or finished it).
STATE_BY = "study:state_by"
#: Attributes no read through the retry wrapper shows.
HIDDEN = frozenset({CREATED_BY, STATE_BY})


class Done:
    """A retried call's result, found by a check that its first attempt landed."""

    def __init__(self, value: Any) -> None:
        self.value = value


def new_token() -> str:
    """A fresh token (128 random bits as hex)."""
    return uuid.uuid4().hex


def unique_study_name() -> str:
    """A study name as Optuna makes one for a study created without a name."""
    return DEFAULT_STUDY_NAME_PREFIX + str(uuid.uuid4())


class LedgerRDB(CreateTrialOnce, RDBStorage):
    """Optuna's RDB storage whose trial creation is one attempt (see the module docstring);
    the rows are the ones Optuna writes."""


def with_token(template: FrozenTrial | None, token: str) -> FrozenTrial:
    """A copy of ``template`` (or of the trial Optuna creates without one) marked
    `CREATED_BY` ``token``."""
    if template is None:
        return running_template({CREATED_BY: token})
    marked = copy.copy(template)
    marked.system_attrs = {**template.system_attrs, CREATED_BY: token}
    return marked


def create_study(
    rdb: RDBStorage, directions: Sequence[StudyDirection], name: str, token: str
) -> int:
    """Create the study ``name`` marked `CREATED_BY` ``token``, in one transaction; its id.

    Raises:
        optuna.exceptions.DuplicatedStudyError: a study of that name exists.
    """
    import json

    import sqlalchemy.exc

    models = rdb_models()

    try:
        with rdb_session(rdb) as session:
            directions_ = [
                models.StudyDirectionModel(objective=objective, direction=d)
                for objective, d in enumerate(directions)
            ]
            study = models.StudyModel(study_name=name, directions=directions_)
            session.add(study)
            session.flush()
            session.add(
                models.StudySystemAttributeModel(
                    study_id=study.study_id, key=CREATED_BY, value_json=json.dumps(token)
                )
            )
            study_id = int(study.study_id)
    except sqlalchemy.exc.IntegrityError:
        raise optuna.exceptions.DuplicatedStudyError(f"a study named {name!r} exists") from None
    return study_id


def set_state(
    rdb: RDBStorage,
    trial_id: int,
    state: OptunaState,
    values: Sequence[float] | None,
    token: str,
) -> bool:
    """Optuna's ``set_trial_state_values`` (take a waiting trial: RUNNING, started now; or
    finish it, with its values) marked `STATE_BY` ``token``, in one transaction: False when
    taking a trial that is not waiting.

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial is finished.
        KeyError: no such trial.
    """
    import sqlalchemy.exc

    models = rdb_models()

    try:
        with rdb_session(rdb) as session:
            trial = models.TrialModel.find_or_raise_by_id(trial_id, session, for_update=True)
            rdb.check_trial_is_updatable(trial_id, trial.state)
            for objective, value in enumerate(values or ()):
                set_value_in(rdb, session, trial, objective, value)
            if state == OptunaState.RUNNING and trial.state != OptunaState.WAITING:
                return False
            set_attr_in(rdb, session, models.TrialSystemAttributeModel, trial_id, STATE_BY, token)
            trial.state = state
            if state == OptunaState.RUNNING:
                trial.datetime_start = datetime.now()
            if state.is_finished():
                trial.datetime_complete = datetime.now()
    except sqlalchemy.exc.IntegrityError:
        return False
    return True


def study_created(storage: BaseStorage, name: str, token: str | None) -> int | None:
    """Before a retry of creating the study ``name``: its id if this call's first attempt
    created it (its `CREATED_BY` is ``token``; with ``token`` None, any study of that name:
    a name of its own), None when no such study exists.

    Raises:
        optuna.exceptions.DuplicatedStudyError: another call created it.
    """
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    if token is None or storage.get_study_system_attrs(study_id).get(CREATED_BY) == token:
        return study_id
    raise optuna.exceptions.DuplicatedStudyError(f"a study named {name!r} exists")


def trial_created(storage: BaseStorage, study_id: int, token: str) -> int | None:
    """Before a retry of creating a trial: the id of the trial the first attempt created
    (marked `CREATED_BY` ``token``), or None."""
    for trial in storage.get_all_trials(study_id, deepcopy=False):
        if trial.system_attrs.get(CREATED_BY) == token:
            return id_of_trial(trial)
    return None


def state_set(storage: BaseStorage, trial_id: int, state: OptunaState, token: str) -> bool:
    """Before a retry of a state change: whether the first attempt made it (the trial is in
    ``state``, marked `STATE_BY` ``token``)."""
    trial = storage.get_trial(trial_id)
    return trial.state is state and trial.system_attrs.get(STATE_BY) == token


def hide_study(study: Any) -> Any:
    """``study`` (a `FrozenStudy`) without the `HIDDEN` attributes (a copy if it had any)."""
    if HIDDEN.isdisjoint(study.system_attrs):
        return study
    shown = copy.copy(study)
    shown.system_attrs = {k: v for k, v in study.system_attrs.items() if k not in HIDDEN}
    return shown


def hide_trial(trial: FrozenTrial) -> FrozenTrial:
    """``trial`` without the `HIDDEN` attributes (a copy if it had any)."""
    if HIDDEN.isdisjoint(trial.system_attrs):
        return trial
    shown = copy.copy(trial)
    shown.system_attrs = {k: v for k, v in trial.system_attrs.items() if k not in HIDDEN}
    return shown


def hide_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """System attributes without the `HIDDEN` ones."""
    if HIDDEN.isdisjoint(attrs):
        return attrs
    return {k: v for k, v in attrs.items() if k not in HIDDEN}


def landed_as(
    inner: BaseStorage,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: Exception,
    transient: bool,
) -> Done | None:
    """The result of the write ``name`` whose earlier attempt did land (its retry is refused for
    it by ``exc``, ``transient`` or not), or None: a study deleted twice, a parameter set twice
    to the same value, a trial finished twice in the same state and values (a storage without
    `set_state`), a group of writes that closed the trial."""

    def arg(index: int, key: str) -> Any:
        return args[index] if len(args) > index else kwargs.get(key)

    if name == "delete_study" and isinstance(exc, KeyError):  # gone: the first attempt did it
        forget = getattr(getattr(inner, "_cache", None), "delete_study_cache", None)
        if forget is not None:  # Optuna's proxy client forgets it only when answered
            forget(arg(0, "study_id"))
        return Done(None)
    if name == "set_trial_state_values" and isinstance(
        exc, optuna.exceptions.UpdateFinishedTrialError
    ):
        state, values = arg(1, "state"), arg(2, "values")
        frozen = inner.get_trial(arg(0, "trial_id"))
        same = values is None or frozen.values == list(values)
        if isinstance(state, OptunaState) and frozen.state is state and same:
            return Done(True)
    if name == "set_trial_param" and not transient:  # refused as a duplicate
        trial_id, param = arg(0, "trial_id"), arg(1, "param_name")
        dist = arg(3, "distribution")
        try:
            frozen = inner.get_trial(trial_id)
        except Exception:
            return None
        held = param in frozen.params and dist is not None
        if held and dist.to_internal_repr(frozen.params[param]) == arg(2, "param_value_internal"):
            return Done(None)
        return None
    if name == WRITE_TRIAL and isinstance(exc, optuna.exceptions.UpdateFinishedTrialError):
        writes = arg(0, "writes")
        if writes is not None and closed_as(inner.get_trial(writes.trial_id), writes):
            return Done(None)
    return None
