"""Claims: taking a slot of a stratum's budget and recording how its trial went (reading
trials back is `reading.TrialReader`'s job).

Budgets are enforced through Optuna's atomic trial numbering: `Claims.claim` asks for a trial
and keeps it only if fewer than ``budget`` counted trials have lower numbers, so any number of
processes on one storage never exceed a stratum's budget. Optuna's own trial state mirrors the
ledger status (COMPLETE with the objective as value, PRUNED with the steps it ran, FAIL), so
Optuna's samplers and optuna-dashboard read the ledger as an ordinary Optuna study, every
number in steps to target (`optuna_view` says what they see).

Example: with a budget of 2, three processes claiming at once get trials 0 and 1; the third's
trial 2 is closed as ``discarded`` and it gets None.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import forget_cached_trials, id_of_study, id_of_trial, trial_of
from study.config.space import Stratum
from study.config.target import Target
from study.ledger import records
from study.ledger.access import Slot, StorageAccess
from study.ledger.batch import TrialWrites
from study.ledger.liveness import HEARTBEAT
from study.ledger.optuna_view import intermediate_values, pruned_meaning, view_attrs
from study.ledger.owners import Beat, owner_id
from study.ledger.reading import TrialReader
from study.ledger.records import LedgerTrial, Origin, encode_result, split_stored, truncate_error
from study.ledger.retry import CLAIM_TOKEN
from study.results import TrialResult, TrialState

#: At most this many points of a trial's curve become its Optuna intermediate values (rows
#: written with the rest of the finished trial, in one transaction on a database).
INTERMEDIATE_POINTS = 50


#: Samplers whose `before_trial` writes nothing to the trial (Grid's notes its grid point).
_QUIET_BEFORE = (
    optuna.samplers.TPESampler,
    optuna.samplers.RandomSampler,
    optuna.samplers.QMCSampler,
)


def _twin(frozen: FrozenTrial, token: str, trial_id: int) -> bool:
    """Whether ``frozen`` is another trial created by the claim whose token is ``token``."""
    return (
        id_of_trial(frozen) != trial_id
        and frozen.state is OptunaState.RUNNING
        and frozen.system_attrs.get(CLAIM_TOKEN) == token
    )


class Claims:
    """One study's trials claimed and recorded through ``access``; ``reader`` reads a trial
    back when this process did not write it (see the module docstring)."""

    def __init__(self, access: StorageAccess, reader: TrialReader) -> None:
        self._access = access
        self._reader = reader

    def claim(self, stratum: Stratum, budget: int, *, grace: float | None = None) -> Slot | None:
        """Atomically take the next slot of a stratum, or return None when its budget is spent.

        The trial is created with its owner, its status and (with ``grace``) its first
        heartbeat (`Liveness.beat`) in one write, then the stratum is read once to count the
        trials before it. A creation that landed twice (a storage that retries a creation
        whose commit's answer was lost by itself, as Optuna's own database storage does; the
        one `open_storage` opens does not, `study.ledger.tokens.LedgerRDB`) leaves a twin
        carrying the same `CLAIM_TOKEN`: it is closed as ``discarded``, so no open trial is
        left in this process's name that no one would ever take for dead.
        """
        access = self._access
        study = access.study(stratum)
        owner = owner_id()
        system: dict[str, Any] = {CLAIM_TOKEN: uuid.uuid4().hex}
        if grace is not None:
            system[HEARTBEAT] = Beat(access.clock.now(), grace).to_stored()
        template = FrozenTrial(
            number=-1,
            state=OptunaState.RUNNING,
            value=None,
            datetime_start=datetime.now(),
            datetime_complete=None,
            params={},
            distributions={},
            user_attrs={records.OWNER: owner, records.STATUS: TrialState.RUNNING.value},
            system_attrs=system,
            intermediate_values={},
            trial_id=-1,
        )
        forget_cached_trials(study)  # as `Study.ask`: samplers read afresh
        trial_id = access.storage.create_new_trial(id_of_study(study), template)
        access.track(trial_id, stratum)
        if grace is not None:
            access.note_stamp(trial_id, system[HEARTBEAT]["at"])
        access.changed(trial_id)
        trials = access.frozen(stratum)
        discarded = {records.STATUS: TrialState.DISCARDED.value}
        token = system[CLAIM_TOKEN]
        twins = [t for t in trials if _twin(t, token, trial_id)]
        for twin in twins:  # this claim's creation landed twice: keep one
            access.track(id_of_trial(twin), stratum)
            access.wrote(twin)  # this process made it: it reads its closing
            access.flush(TrialWrites(id_of_trial(twin), user=discarded, state=OptunaState.FAIL))
        trials = [t for t in trials if t not in twins]
        frozen = next((t for t in trials if id_of_trial(t) == trial_id), None)
        frozen = frozen or access.storage.get_trial(trial_id)
        trial = trial_of(study, frozen)
        if not isinstance(study.sampler, _QUIET_BEFORE):  # it may have written to the trial
            frozen = access.storage.get_trial(trial_id)
        access.wrote(frozen)
        earlier = [t for t in trials if t.number < frozen.number and access.status(t).counts()]
        if len(earlier) >= budget:
            access.flush(TrialWrites(trial_id, user=discarded, state=OptunaState.FAIL))
            return None
        return Slot(stratum, frozen.number, owner, trial)

    def start(
        self, slot: Slot, *, tuner: str, origin: Origin, extras: Mapping[str, Any] | None = None
    ) -> LedgerTrial:
        """Note who proposed the slot's trial and how (with what the tuners held for it: its
        params, `TunerState.record_params`) in one write; return it as a running
        `LedgerTrial`."""
        attrs = {
            records.TUNER: tuner,
            records.ORIGIN: origin,
            records.BATCH_SIZE: slot.stratum.batch_size,
            records.STRATEGY: slot.stratum.strategy,
            **(extras or {}),
        }
        return self._written_back(slot, TrialWrites(self._access.slot_id(slot), user=attrs))

    def finish(
        self,
        slot: Slot,
        result: TrialResult,
        objective: float,
        *,
        target: Target | None = None,
        meaning: str | None = None,
    ) -> LedgerTrial:
        """Record a finished trial and close it, in one write; return it.

        Stored: the result and its curve (see `records`), ``meaning`` (what the ``objective``
        value says, e.g. "penalty: never reached val_accuracy>=0.6"), and what Optuna readers
        see (`optuna_view`): with a ``target``, the distance to it along the curve as the
        trial's intermediate values (at most `INTERMEDIATE_POINTS`); a pruned trial's value is
        the steps it ran (a lower bound), not Optuna's last intermediate value.
        """
        user, system = split_stored(encode_result(result))
        user[records.SCORE] = objective
        user.update(view_attrs(result, target, INTERMEDIATE_POINTS))
        pruned = result.state is TrialState.PRUNED
        if meaning or pruned:
            user[records.OBJECTIVE] = (
                pruned_meaning(result.steps_run, meaning) if pruned else meaning
            )
        writes = TrialWrites(self._access.slot_id(slot), user=user, system=system)
        if target is not None:
            writes.intermediate = dict(intermediate_values(result, target, INTERMEDIATE_POINTS))
        if result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
            return self._close(slot, writes, OptunaState.FAIL, None)
        if pruned:
            return self._close(slot, writes, OptunaState.PRUNED, [float(result.steps_run)])
        if not math.isfinite(objective):  # what `Study.tell` does with a value it cannot rank
            return self._close(slot, writes, OptunaState.FAIL, None)
        return self._close(slot, writes, OptunaState.COMPLETE, [float(objective)])

    def _close(
        self,
        slot: Slot,
        writes: TrialWrites,
        state: OptunaState,
        values: list[float] | None,
    ) -> LedgerTrial:
        """Close the slot's trial in ``state`` with ``values`` and ``writes`` in one write,
        after the stratum's sampler saw it (what `Study.tell` does, but for its rule that a
        pruned trial's value is its last intermediate value)."""
        study = self._access.study(slot.stratum)
        forget_cached_trials(study)  # as `Study.tell`
        try:
            seen = writes.applied_to(self._access.mine(slot))
            study.sampler.after_trial(study, seen, state, values)
        finally:
            writes.state, writes.values = state, values
            trial = self._written_back(slot, writes)
        return trial

    def _written_back(self, slot: Slot, writes: TrialWrites) -> LedgerTrial:
        """Write ``writes`` (with what is held for the trial) and return the trial as it now
        reads, without reading it back when this process claimed it."""
        frozen = self._access.flush(writes)
        if frozen is None:
            return self._reader.trial(slot.stratum, slot.number)
        return self._access.decode(slot.stratum, frozen)

    def fail(self, slot: Slot, error: str) -> LedgerTrial:
        """Close a slot whose proposal or bookkeeping raised as ``failed`` (if still open)."""
        frozen = self._access.storage.get_trial(self._access.slot_id(slot))
        if not frozen.state.is_finished():
            attrs = {records.STATUS: TrialState.FAILED.value, records.ERROR: truncate_error(error)}
            writes = TrialWrites(id_of_trial(frozen), user=attrs)
            try:
                return self._close(slot, writes, OptunaState.FAIL, None)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # closed meanwhile by another process
        return self._reader.trial(slot.stratum, slot.number)

    def interrupt(self, slot: Slot) -> None:
        """Close a trial stopped from outside (Ctrl-C) as ``interrupted``: its slot runs again."""
        attrs = {records.STATUS: TrialState.INTERRUPTED.value}
        self._close(
            slot, TrialWrites(self._access.slot_id(slot), user=attrs), OptunaState.FAIL, None
        )

    def import_trials(self, stratum: Stratum, trials: Sequence[LedgerTrial]) -> None:
        """Add trials that ran elsewhere (e.g. a published study) as finished trials.

        Each gets its result, tuner and extras as stored attributes; in Optuna it is COMPLETE
        with its last step as value, or FAIL if it diverged or failed. Each parameter gets a
        distribution over the values seen (a float range, log if all are positive; categorical
        if not all numbers), so Optuna can load the trials.
        """
        distributions = _observed_distributions(trials)
        study = self._access.study(stratum)
        for trial in trials:
            assert trial.result is not None, "imported trials are finished"
            failed = trial.result.state in (
                TrialState.DIVERGED,
                TrialState.FAILED,
                TrialState.INFEASIBLE,
            )
            user, system = split_stored(encode_result(trial.result))
            user.update(
                {
                    records.TUNER: trial.tuner,
                    records.BATCH_SIZE: stratum.batch_size,
                    records.STRATEGY: stratum.strategy,
                    records.OBJECTIVE: "the trial's last step (an imported trial has no target)",
                    **trial.extras,
                }
            )
            study.add_trial(
                optuna.trial.create_trial(
                    params=dict(trial.params),
                    distributions={k: distributions[k] for k in trial.params},
                    state=OptunaState.FAIL if failed else OptunaState.COMPLETE,
                    value=None if failed else float(trial.result.steps_run),
                    user_attrs=user,
                    system_attrs=system,
                )
            )


def _observed_distributions(trials: Sequence[LedgerTrial]) -> dict[str, Any]:
    """Per parameter: a float range over the observed values (log if all > 0), or categorical."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    values: dict[str, list[Any]] = {}
    for t in trials:
        for name, value in t.params.items():
            values.setdefault(name, []).append(value)
    out: dict[str, Any] = {}
    for name, seen in values.items():
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
            low, high = float(min(seen)), float(max(seen))
            out[name] = FloatDistribution(low, high, log=low > 0)
        else:
            out[name] = CategoricalDistribution(sorted(set(seen), key=repr))
    return out
