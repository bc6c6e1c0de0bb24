"""A group of writes to one trial appended to a journal file at once.

Optuna's `JournalStorage` appends (and fsyncs) the journal file once per call, so closing a
trial with 40 intermediate values, its attributes and its state cost ~60 appends, each waiting
for the disk. `append_group` writes the same log lines Optuna's methods write (one per
attribute, parameter and value, the state last), in one append and one fsync, then reads them
back as each call would; a trial closed already refuses the group with
`optuna.exceptions.UpdateFinishedTrialError`, as each call would. Used by `study.ledger.batch.write`
for a journal file; opening a trial (``RUNNING``, Optuna's claim of a waiting trial) is left to
Optuna's own call.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import optuna
from optuna.distributions import distribution_to_json
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import (
    JournalOperation,
    append_to_trial,
    cache_backend,
    journal_usable,
)


def journal_of(storage: optuna.storages.BaseStorage) -> Any | None:
    """The Optuna `JournalStorage` behind ``storage`` (through wrappers), or None."""
    from optuna.storages import JournalStorage

    current: Any = storage
    for _ in range(5):
        if isinstance(current, JournalStorage):
            return current if journal_usable(current) else None
        if current is None:
            return None
        current = current.__dict__.get("inner") or cache_backend(current)
    return None


def _logs(writes: Any) -> list[tuple[JournalOperation, dict[str, Any]]]:
    """The log lines Optuna's methods write for ``writes`` (a `study.ledger.batch.TrialWrites`),
    in `_one_call_each`'s order."""
    trial_id, out = writes.trial_id, []
    for name, (value, dist) in writes.params.items():
        out.append(
            (
                JournalOperation.SET_TRIAL_PARAM,
                {
                    "trial_id": trial_id,
                    "param_name": name,
                    "param_value_internal": dist.to_internal_repr(value),
                    "distribution": distribution_to_json(dist),
                },
            )
        )
    for key, value in writes.user.items():
        out.append((JournalOperation.SET_TRIAL_USER_ATTR, {"trial_id": trial_id, "user_attr": {key: value}}))  # fmt: skip
    for key, value in writes.system.items():
        out.append((JournalOperation.SET_TRIAL_SYSTEM_ATTR, {"trial_id": trial_id, "system_attr": {key: value}}))  # fmt: skip
    for step, value in writes.intermediate.items():
        out.append(
            (
                JournalOperation.SET_TRIAL_INTERMEDIATE_VALUE,
                {"trial_id": trial_id, "step": step, "intermediate_value": value},
            )
        )
    if writes.state is not None:
        log: dict[str, Any] = {"trial_id": trial_id, "state": writes.state, "values": writes.values}
        if writes.state.is_finished():
            now = datetime.now(tz=timezone.utc).isoformat(timespec="microseconds")
            log["datetime_complete"] = now
        out.append((JournalOperation.SET_TRIAL_STATE_VALUES, log))
    return out


def append_group(journal: Any, writes: Any) -> bool:
    """Append ``writes`` to ``journal`` in one append; False (nothing written) when they open
    the trial (state ``RUNNING``: Optuna's call does that).

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial is closed already.
    """
    if writes.state is OptunaState.RUNNING:
        return False
    logs = _logs(writes)
    if not logs:
        return True
    append_to_trial(journal, writes.trial_id, logs)
    return True
