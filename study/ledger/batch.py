"""A group of writes to one trial, stored in one transaction.

Optuna's storage API writes one attribute, parameter or intermediate value per call, and on a
database each call is a transaction. `TrialWrites` gathers what the ledger writes about a trial
at one moment (its attributes, parameters, the curve's intermediate values, and closing it) and
`write` stores it: on an Optuna RDB storage in one transaction with Optuna's own models (the
rows are the ones Optuna's methods write, so Optuna, optuna-dashboard and older ledgers read
them as before); through a `study serve-storage` proxy in one call that the proxy stores the
same way (a storage that offers ``write_trial``: the storage_proxy extension's client); on a
journal file in one append of the lines Optuna's calls write (`study.ledger.journal_batch`); on
any other storage (Optuna's own proxy, memory) one call each, in the same order. A trial closed already (e.g. recovered as interrupted by another process)
refuses the whole group with `optuna.exceptions.UpdateFinishedTrialError`, as each call would.

On a `study.ledger.retry.RetryingStorage` the transaction is retried through transient faults
like every other call; it is all or nothing, so a retry writes the same group again (a
parameter the first attempt stored is set again, not inserted twice), and one that closes the
trial whose commit landed before its answer was lost is done (the trial is closed in that
state).

Example: finishing a trial with 16 attributes, its curve and 40 intermediate values is one
transaction instead of 58.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import (
    cache_backend,
    id_of_trial,
    rdb_models,
    rdb_session,
    set_attr_in,
    set_intermediate_in,
    set_param_in,
    set_value_in,
)
from study.ledger.journal_batch import append_group, journal_of

#: The name `RetryingStorage` knows a group of writes by (see `study.ledger.retry`).
WRITE_TRIAL = "write_trial"
WRITE_STUDY = "write_study"


@dataclass
class TrialWrites:
    """What to write about the trial ``trial_id``: user and system attributes, parameters
    (name -> (external value, distribution)), intermediate values (step -> value) and, last,
    its ``state`` with ``values`` (None: it stays open)."""

    trial_id: int
    user: dict[str, Any] = field(default_factory=dict)
    system: dict[str, Any] = field(default_factory=dict)
    params: dict[str, tuple[Any, BaseDistribution]] = field(default_factory=dict)
    intermediate: dict[int, float] = field(default_factory=dict)
    state: OptunaState | None = None
    values: Sequence[float] | None = None

    def __bool__(self) -> bool:
        return bool(
            self.user or self.system or self.params or self.intermediate or self.state is not None
        )

    def merge(self, other: TrialWrites) -> None:
        """Add ``other``'s writes (later values win)."""
        self.user.update(other.user)
        self.system.update(other.system)
        self.params.update(other.params)
        self.intermediate.update(other.intermediate)
        if other.state is not None:
            self.state, self.values = other.state, other.values

    def applied_to(self, frozen: FrozenTrial) -> FrozenTrial:
        """``frozen`` as it reads once these writes are stored (a copy; ``frozen`` is kept)."""
        params = {**frozen.params, **{k: v for k, (v, _) in self.params.items()}}
        dists = {**frozen.distributions, **{k: d for k, (_, d) in self.params.items()}}
        state = frozen.state if self.state is None else self.state
        values = frozen.values if self.state is None else self.values
        return FrozenTrial(
            number=frozen.number,
            state=state,
            value=None,
            values=None if values is None else list(values),
            datetime_start=frozen.datetime_start,
            datetime_complete=frozen.datetime_complete if self.state is None else datetime.now(),
            params=params,
            distributions=dists,
            user_attrs={**frozen.user_attrs, **self.user},
            system_attrs={**frozen.system_attrs, **self.system},
            intermediate_values={**frozen.intermediate_values, **self.intermediate},
            trial_id=id_of_trial(frozen),
        )


def rdb_of(storage: optuna.storages.BaseStorage) -> Any | None:
    """The Optuna `RDBStorage` behind ``storage`` (through the retry wrapper and Optuna's trial
    cache), or None for any other storage."""
    from optuna.storages import RDBStorage

    seen = 0
    current: Any = storage
    while current is not None and seen < 5:
        if isinstance(current, RDBStorage):
            return current
        current = current.__dict__.get("inner") or cache_backend(current)
        seen += 1
    return None


def write(storage: optuna.storages.BaseStorage, writes: TrialWrites) -> None:
    """Store ``writes`` (see the module docstring).

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial is closed already.
    """
    if not writes:
        return
    rdb = rdb_of(storage)
    retried = getattr(storage, "retried", None)
    if rdb is None:
        journal = journal_of(storage)  # a journal file: one append (`journal_batch`)
        if journal is not None and append_group(journal, writes):
            return
        grouped = getattr(storage, "write_trial", None)  # a `study serve-storage` proxy's
        call = (lambda: grouped(writes)) if grouped else None
        if call is None or not (retried(WRITE_TRIAL, call, writes) if retried else call()):
            _one_call_each(storage, writes)  # no such call there (e.g. Optuna's own proxy)
        return
    if retried is not None:
        retried(WRITE_TRIAL, lambda: _in_one_transaction(rdb, writes), writes)
    else:
        _in_one_transaction(rdb, writes)


def _one_call_each(storage: optuna.storages.BaseStorage, writes: TrialWrites) -> None:
    trial_id = writes.trial_id
    for name, (value, dist) in writes.params.items():
        storage.set_trial_param(trial_id, name, dist.to_internal_repr(value), dist)
    for key, value in writes.user.items():
        storage.set_trial_user_attr(trial_id, key, value)
    for key, value in writes.system.items():
        storage.set_trial_system_attr(trial_id, key, value)
    for step, value in writes.intermediate.items():
        storage.set_trial_intermediate_value(trial_id, step, value)
    if writes.state is not None:
        storage.set_trial_state_values(trial_id, writes.state, writes.values)


def _in_one_transaction(rdb: Any, writes: TrialWrites) -> None:
    """The writes in one session of Optuna's RDB storage, with the rows its methods write
    (`RDBStorage.set_trial_state_values` and the ``_without_commit`` helpers it is built of)."""
    models = rdb_models()
    trial_id = writes.trial_id
    with rdb_session(rdb) as session:
        trial = models.TrialModel.find_or_raise_by_id(trial_id, session, for_update=True)
        rdb.check_trial_is_updatable(trial_id, trial.state)
        for name, (value, dist) in writes.params.items():
            internal = dist.to_internal_repr(value)
            found = models.TrialParamModel.find_by_trial_and_param_name(trial, name, session)
            if found is None:
                set_param_in(rdb, session, trial_id, name, internal, dist)
            else:  # a retry whose first commit landed: the same value again
                found.param_value = internal
                found.distribution_json = optuna.distributions.distribution_to_json(dist)
        for model, attrs in (
            (models.TrialUserAttributeModel, writes.user),
            (models.TrialSystemAttributeModel, writes.system),
        ):
            for key, value in attrs.items():
                set_attr_in(rdb, session, model, trial_id, key, value)
        for step, value in writes.intermediate.items():
            set_intermediate_in(rdb, session, trial_id, step, value)
        if writes.state is not None:
            for objective, value in enumerate(writes.values or ()):
                set_value_in(rdb, session, trial, objective, value)
            trial.state = writes.state
            if writes.state.is_finished():
                trial.datetime_complete = datetime.now()


def closed_as(frozen: FrozenTrial, writes: TrialWrites) -> bool:
    """Whether ``frozen`` is closed in the state ``writes`` closes it in (a group whose commit
    landed)."""
    return writes.state is not None and frozen.state is writes.state


def write_study(
    storage: optuna.storages.BaseStorage,
    study_id: int,
    user: Mapping[str, Any],
    system: Mapping[str, Any] | None = None,
) -> None:
    """Set the study ``study_id``'s user (and system) attributes: one transaction on an RDB
    storage (retried like every call; a retry sets the same values), one call each elsewhere.
    Two processes setting the same new keys at once: one's group stands, the other's is
    dropped (Optuna's own rule for a key written twice at once)."""
    system = dict(system or {})
    rdb = rdb_of(storage)
    if rdb is None:
        for key, value in user.items():
            storage.set_study_user_attr(study_id, key, value)
        for key, value in system.items():
            storage.set_study_system_attr(study_id, key, value)
        return

    def in_one_transaction() -> None:
        models = rdb_models()
        with rdb_session(rdb, True) as session:
            study = models.StudyModel.find_or_raise_by_id(study_id, session)
            for model, attrs in (
                (models.StudyUserAttributeModel, user),
                (models.StudySystemAttributeModel, system),
            ):
                for key, value in attrs.items():
                    found = model.find_by_study_and_key(study, key, session)
                    if found is None:
                        session.add(model(study_id=study_id, key=key, value_json=json.dumps(value)))
                    else:
                        found.value_json = json.dumps(value)

    retried = getattr(storage, "retried", None)
    if retried is not None:
        retried(WRITE_STUDY, in_one_transaction, study_id)
    else:
        in_one_transaction()
