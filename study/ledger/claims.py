"""Claims and trial records: taking a slot of a stratum's budget, recording how its trial
went, and reading trials back as `LedgerTrial` records.

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
from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.config.target import Target
from study.ledger import records
from study.ledger.access import Slot, StorageAccess
from study.ledger.liveness import stamp
from study.ledger.optuna_view import intermediate_values, pruned_meaning, view_attrs
from study.ledger.owners import owner_id
from study.ledger.records import (
    LedgerTrial,
    best_of,
    decode_curve,
    encode_result,
    merge_stored,
    split_stored,
    truncate_error,
)
from study.results import TrialResult, TrialState

#: At most this many points of a trial's curve become its Optuna intermediate values (each is
#: one storage write).
INTERMEDIATE_POINTS = 50


class Claims(StorageAccess):
    """One study's trials: claimed, recorded and read back (see the module docstring)."""

    # -- writing trials -----------------------------------------------------------------------
    def claim(self, stratum: Stratum, budget: int, *, grace: float | None = None) -> Slot | None:
        """Atomically take the next slot of a stratum, or return None when its budget is spent.

        With ``grace`` the trial gets its first heartbeat (`Liveness.beat`) at once.
        """
        study = self._study(stratum)
        trial = study.ask()
        owner = owner_id()
        trial.set_user_attr(records.OWNER, owner)
        trial.set_user_attr(records.STATUS, TrialState.RUNNING.value)
        if grace is not None:
            stamp(self, trial._trial_id, grace)
        earlier = [
            t for t in self._frozen(stratum) if t.number < trial.number and self._status(t).counts()
        ]
        if len(earlier) >= budget:
            trial.set_user_attr(records.STATUS, TrialState.DISCARDED.value)
            study.tell(trial, state=OptunaState.FAIL)
            return None
        return Slot(stratum, trial.number, owner, trial)

    def start(
        self, slot: Slot, *, tuner: str, origin: str, extras: Mapping[str, Any] | None = None
    ) -> LedgerTrial:
        """Note who proposed the slot's trial and how; return it as a running `LedgerTrial`."""
        attrs = {
            records.TUNER: tuner,
            records.ORIGIN: origin,
            records.BATCH_SIZE: slot.stratum.batch_size,
            records.STRATEGY: slot.stratum.strategy,
            **(extras or {}),
        }
        for key, value in attrs.items():
            slot.trial.set_user_attr(key, value)
        return self.trial(slot.stratum, slot.number)

    def finish(
        self,
        slot: Slot,
        result: TrialResult,
        objective: float,
        *,
        target: Target | None = None,
        meaning: str | None = None,
    ) -> LedgerTrial:
        """Record a finished trial and close it; return it.

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
        for key, value in user.items():
            slot.trial.set_user_attr(key, value)
        trial_id = self._slot_id(slot)
        for key, value in system.items():
            self.storage.set_trial_system_attr(trial_id, key, value)
        if target is not None:
            for step, value in intermediate_values(result, target, INTERMEDIATE_POINTS).items():
                slot.trial.report(value, step)
        study = self._study(slot.stratum)
        if result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
            study.tell(slot.trial, state=OptunaState.FAIL)
        elif pruned:
            self._close_pruned(study, trial_id, float(result.steps_run))
        else:
            study.tell(slot.trial, objective)
        return self.trial(slot.stratum, slot.number)

    def _close_pruned(self, study: optuna.Study, trial_id: int, steps: float) -> None:
        """Close a trial as PRUNED with ``steps`` as its value (what `Study.tell` does, but
        for its rule that a pruned trial's value is its last intermediate value)."""
        frozen = self.storage.get_trial(trial_id)
        try:
            study.sampler.after_trial(study, frozen, OptunaState.PRUNED, [steps])
        finally:
            self.storage.set_trial_state_values(trial_id, OptunaState.PRUNED, [steps])

    def fail(self, slot: Slot, error: str) -> LedgerTrial:
        """Close a slot whose proposal or bookkeeping raised as ``failed`` (if still open)."""
        frozen = self.storage.get_trial(self._slot_id(slot))
        if not frozen.state.is_finished():
            slot.trial.set_user_attr(records.STATUS, TrialState.FAILED.value)
            slot.trial.set_user_attr(records.ERROR, truncate_error(error))
            self._study(slot.stratum).tell(slot.trial, state=OptunaState.FAIL)
        return self.trial(slot.stratum, slot.number)

    def interrupt(self, slot: Slot) -> None:
        """Close a trial stopped from outside (Ctrl-C) as ``interrupted``: its slot runs again."""
        trial_id = self._slot_id(slot)
        self.storage.set_trial_user_attr(trial_id, records.STATUS, TrialState.INTERRUPTED.value)
        self._study(slot.stratum).tell(slot.trial, state=OptunaState.FAIL)

    def import_trials(self, stratum: Stratum, trials: Sequence[LedgerTrial]) -> None:
        """Add trials that ran elsewhere (e.g. a published study) as finished trials.

        Each gets its result, tuner and extras as stored attributes; in Optuna it is COMPLETE
        with its last step as value, or FAIL if it diverged or failed. Each parameter gets a
        distribution over the values seen (a float range, log if all are positive; categorical
        if not all numbers), so Optuna can load the trials.
        """
        distributions = _observed_distributions(trials)
        study = self._study(stratum)
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

    # -- reading trials -----------------------------------------------------------------------
    def strata(self) -> list[Stratum]:
        """The strata stored for this study, by strategy then batch size."""
        prefix = f"{self.name}/"
        found = [
            self._stratum_of(s.study_name, s.user_attrs)
            for s in self.storage.get_all_studies()
            if s.study_name.startswith(prefix)
        ]
        return sorted(found, key=lambda s: (s.strategy, s.batch_size))

    def trials(self, stratum: Stratum) -> list[LedgerTrial]:
        """Every trial of a stratum, in number order (empty before the stratum exists)."""
        return [self._decode(stratum, t) for t in self._frozen(stratum)]

    def trial(self, stratum: Stratum, number: int) -> LedgerTrial:
        frozen = self.storage.get_trial(self._trial_id(stratum, number))
        return self._decode(stratum, frozen)

    def counted(self, stratum: Stratum) -> list[LedgerTrial]:
        """Trials that consume budget: finished or running, not interrupted or discarded."""
        return [t for t in self.trials(stratum) if t.status.counts()]

    def remaining(self, stratum: Stratum, budget: int) -> int:
        return max(0, budget - len(self.counted(stratum)))

    def best(self, stratum: Stratum) -> LedgerTrial | None:
        """The stratum's best reached trial (see `records.best_of`), or None."""
        return best_of(self.trials(stratum))

    def measurement_rows(
        self, *, include_running: bool = True
    ) -> list[tuple[LedgerTrial, list[dict[str, Any]]]]:
        """Every trial of the study with its stored measurement rows, in start order.

        Interrupted and discarded trials are left out (they are not trials of the study);
        running ones unless ``include_running`` is False.
        """
        found = []
        for stratum in self.strata():
            for frozen in self._frozen(stratum):
                t = self._decode(stratum, frozen)
                if not t.status.counts() or (
                    t.status is TrialState.RUNNING and not include_running
                ):
                    continue
                start = t.started_at if t.started_at is not None else math.inf
                stored = merge_stored(frozen.user_attrs, frozen.system_attrs)
                found.append((start, str(stratum), t.number, t, decode_curve(stored)))
        found.sort(key=lambda item: item[:3])
        return [(t, rows) for *_, t, rows in found]


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
