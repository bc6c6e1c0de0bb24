"""The ledger: one study's trials in an Optuna storage, behind typed methods.

Layout in the storage: a root Optuna study named after the study (its attributes: a
`StudyRecord`) and one Optuna study per stratum, named ``NAME/b{batch}/{strategy}``, whose
trials are the stratum's trials (attributes encoded by `study.ledger.records`). Optuna's own
trial state mirrors the ledger status (COMPLETE with the objective as value, PRUNED, FAIL), so
Optuna's samplers and optuna-dashboard read the ledger as an ordinary Optuna study.

Budgets are enforced through Optuna's atomic trial numbering: `Ledger.claim` asks for a trial
and keeps it only if fewer than ``budget`` counted trials have lower numbers, so any number of
processes on one storage never exceed a stratum's budget.

Liveness: a claimed trial names its owner (`owners.owner_id`) and, while it runs, carries the
owner's heartbeat (`Ledger.beat`: a system attribute stamped every few seconds). A trial still
open whose owner is dead (its process gone, on its own host; its heartbeat stale, from anywhere
else) is closed as ``interrupted`` by `Ledger.recover_stale`, and its slot runs again.

This is the only module that touches the storage; everything else reads `LedgerTrial` records.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.errors import UsageError
from study.ledger import records
from study.ledger.access import StorageAccess
from study.ledger.owners import Beat, owner_alive, owner_id
from study.ledger.records import (
    LedgerTrial,
    StudyRecord,
    StudySummary,
    best_of,
    decode_curve,
    encode_result,
    merge_stored,
    split_stored,
    thinned,
    truncate_error,
)
from study.ledger.storage import open_storage
from study.ledger.summary import summarize
from study.results import TrialResult, TrialState

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: At most this many points of a trial's curve become its Optuna intermediate values (each is
#: one storage write).
INTERMEDIATE_POINTS = 50
#: A claimed trial that has no owner yet is left alone for this long (it is being set up).
_SETUP_GRACE_S = 60.0
_WINDOW = "lr_window"
_CENTRE = "lr_centre"
#: The system attribute holding the point a claimed trial reserved (`Ledger.reserve`).
_POINT = "study:point"
#: The system attribute holding a running trial's last heartbeat (`owners.Beat`).
_HEARTBEAT = "study:heartbeat"
#: The user attribute holding the seed of a trial run under another seed than the study's.
SEED = "seed"


@dataclass(frozen=True)
class Slot:
    """A claimed place in a stratum's budget: the trial about to run.

    ``trial`` is the Optuna trial behind it; only the Optuna backend samples on it.
    """

    stratum: Stratum
    number: int
    owner: str
    trial: Any = field(compare=False, repr=False)


class Ledger(StorageAccess):
    """One study's trials in an Optuna storage (see the module docstring)."""

    @classmethod
    def open(cls, url: str | None, name: str, *, create: bool = True) -> Ledger:
        """The ledger of study ``name`` in the storage at ``url`` (see `open_storage`;
        ``create=False`` for read-only use). An RDB storage is wrapped in Optuna's trial cache
        (as Optuna's own studies are): a finished trial is read from the database once per
        process, so reading a stratum costs its open and new trials, not all of them."""
        storage = open_storage(url, create=create)
        if isinstance(storage, optuna.storages.RDBStorage):
            storage = optuna.storages.get_storage(storage)
        return cls(storage, name)

    # -- the study record -------------------------------------------------------------------
    def record(self) -> StudyRecord | None:
        """The study's record, or None if no study of this name is stored."""
        attrs = self._study_attrs(self.name)
        return None if attrs is None else StudyRecord.from_attrs(self.name, attrs)

    def require(self) -> StudyRecord:
        """The study's record; `UsageError` naming the fix if there is none."""
        record = self.record()
        if record is None or (not record.config_text and not record.imported):
            raise UsageError(
                f"no study named {self.name!r} in this storage; `study ls` lists the studies"
            )
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
            for key, value in record.to_attrs().items():
                if key not in study.user_attrs:
                    study.set_user_attr(key, value)
        stored = self.record()
        assert stored is not None
        return stored

    def set_trials_total(self, total: int) -> None:
        self.storage.set_study_user_attr(self._study_id(self.name), "trials_total", total)

    def delete(self) -> None:
        """Delete the study, all its strata and its adaptive allocation's round claims
        (``allocation:<study>#<storage id>/round-<k>``, `study.runner.allocation.claim_round`)."""
        prefix = f"{self.name}/"
        claims = None
        with contextlib.suppress(KeyError):
            claims = f"allocation:{self.name}#{self.storage.get_study_id_from_name(self.name)}/"
        names = [s.study_name for s in self.storage.get_all_studies()]
        strata = sorted((n for n in names if n.startswith(prefix)), reverse=True)
        strata += [n for n in names if claims is not None and n.startswith(claims)]
        for name in [*strata, self.name]:
            with contextlib.suppress(KeyError):
                optuna.delete_study(study_name=name, storage=self.storage)
        self._studies.clear()

    # -- strata -----------------------------------------------------------------------------
    def strata(self) -> list[Stratum]:
        """The strata stored for this study, by strategy then batch size."""
        prefix = f"{self.name}/"
        found = [
            self._stratum_of(s.study_name, s.user_attrs)
            for s in self.storage.get_all_studies()
            if s.study_name.startswith(prefix)
        ]
        return sorted(found, key=lambda s: (s.strategy, s.batch_size))

    def use_sampler(self, sampler_for: Callable[[Stratum], Any]) -> None:
        """Sample the parameters of claimed trials with ``sampler_for(stratum)`` (an Optuna
        sampler; the Optuna backend installs it, so its sampler sees every ledger trial)."""
        self._sampler_for = sampler_for

    def window(self, stratum: Stratum) -> tuple[float, float] | None:
        """The learning-rate range the stratum's search is centred on (set by transfer)."""
        window = (self._study_attrs(self._stratum_name(stratum)) or {}).get(_WINDOW)
        return (float(window[0]), float(window[1])) if window else None

    def set_window(self, stratum: Stratum, window: tuple[float, float], centre: float) -> None:
        study = self._study(stratum)
        study.set_user_attr(_WINDOW, list(window))
        study.set_user_attr(_CENTRE, centre)

    def set_stratum_source(self, stratum: Stratum, source: str) -> None:
        self._study(stratum).set_user_attr("source", source)

    # -- writing trials -----------------------------------------------------------------------
    def claim(self, stratum: Stratum, budget: int, *, grace: float | None = None) -> Slot | None:
        """Atomically take the next slot of a stratum, or return None when its budget is spent.

        With ``grace`` the trial gets its first heartbeat (`beat`) at once.
        """
        study = self._study(stratum)
        trial = study.ask()
        owner = owner_id()
        trial.set_user_attr(records.OWNER, owner)
        trial.set_user_attr(records.STATUS, TrialState.RUNNING.value)
        if grace is not None:
            self.storage.set_trial_system_attr(
                trial._trial_id, _HEARTBEAT, Beat(time.time(), grace).to_stored()
            )
        earlier = [
            t for t in self._frozen(stratum) if t.number < trial.number and self._status(t).counts()
        ]
        if len(earlier) >= budget:
            trial.set_user_attr(records.STATUS, TrialState.DISCARDED.value)
            study.tell(trial, state=OptunaState.FAIL)
            return None
        return Slot(stratum, trial.number, owner, trial)

    def record_params(
        self, slot: Slot, params: Mapping[str, Any], distributions: Mapping[str, Any]
    ) -> None:
        """Store params chosen outside Optuna's sampler as the trial's Optuna params (with their
        distributions), so Optuna's sampler learns from them; unknown names are skipped."""
        trial_id = self._slot_id(slot)
        for name, value in params.items():
            dist = distributions.get(name)
            if dist is not None:
                self.storage.set_trial_param(trial_id, name, dist.to_internal_repr(value), dist)

    def reserve(self, slot: Slot, point: Mapping[str, Any]) -> None:
        """Note the point (metaparameters and seed) the slot's trial is about to run, before its
        params are recorded, so other processes see it (`points`). A later call replaces it."""
        trial_id = self._slot_id(slot)
        self.storage.set_trial_system_attr(trial_id, _POINT, json.dumps(dict(point)))

    def points(self, stratum: Stratum) -> list[tuple[int, dict[str, Any]]]:
        """``(number, point)`` of every trial that consumes the stratum's budget (running or
        finished): the point it reserved, else its params with its ``seed`` (None for the
        study's seed). Trials with neither are left out."""
        found = []
        for frozen in self._frozen(stratum):
            if not self._status(frozen).counts():
                continue
            reserved = frozen.system_attrs.get(_POINT)
            if reserved:
                found.append((frozen.number, dict(json.loads(reserved))))
            elif frozen.params:
                seed = frozen.user_attrs.get(SEED)
                found.append((frozen.number, {**frozen.params, SEED: seed}))
        return found

    def _slot_id(self, slot: Slot) -> int:
        """The storage id of the slot's trial (kept by its Optuna trial: no lookup)."""
        trial_id = getattr(slot.trial, "_trial_id", None)
        return trial_id if trial_id is not None else self._trial_id(slot.stratum, slot.number)

    def frozen(self, slot: Slot) -> optuna.trial.FrozenTrial:
        """The slot's trial as Optuna's samplers take it (with ``slot.trial.study``)."""
        return self.storage.get_trial(self._slot_id(slot))

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
        metric: str | None = None,
        meaning: str | None = None,
    ) -> LedgerTrial:
        """Record a finished trial and close it; return it.

        Stored: the result and its curve (see `records`), ``meaning`` (what the ``objective``
        value says, e.g. "penalty: never reached val_accuracy>=0.6"), and the curve of
        ``metric`` as the trial's intermediate values (at most `INTERMEDIATE_POINTS`). A pruned
        trial's Optuna value is its last intermediate value (Optuna's rule).
        """
        user, system = split_stored(encode_result(result))
        user[records.SCORE] = objective
        if meaning:
            user[records.OBJECTIVE] = meaning
        for key, value in user.items():
            slot.trial.set_user_attr(key, value)
        trial_id = self._slot_id(slot)
        for key, value in system.items():
            self.storage.set_trial_system_attr(trial_id, key, value)
        if metric:
            for step, value in thinned(result.curve, metric, INTERMEDIATE_POINTS).items():
                slot.trial.report(value, step)
        study = self._study(slot.stratum)
        if result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
            study.tell(slot.trial, state=OptunaState.FAIL)
        elif result.state is TrialState.PRUNED:
            if not metric:
                slot.trial.report(objective, result.steps_run)
            study.tell(slot.trial, state=OptunaState.PRUNED)
        else:
            study.tell(slot.trial, objective)
        return self.trial(slot.stratum, slot.number)

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

    def beat(self, slot: Slot, grace: float) -> bool:
        """Stamp the slot's running trial with a heartbeat: its owner promises another one
        within ``grace`` seconds. False if the trial is closed already (e.g. another process
        took it for dead and closed it as interrupted)."""
        try:
            self.storage.set_trial_system_attr(
                self._slot_id(slot),
                _HEARTBEAT,
                Beat(time.time(), grace).to_stored(),
            )
        except optuna.exceptions.UpdateFinishedTrialError:
            return False
        return True

    def recover_stale(self, strata: Sequence[Stratum]) -> list[LedgerTrial]:
        """Close trials whose owner died (`alive`) as ``interrupted`` (failed in Optuna), so
        their slots run again; return them. A trial another process closed first is skipped."""
        stale = []
        for stratum in strata:
            for frozen in self._open_frozen(stratum):
                t = self._decode(stratum, frozen)
                setting_up = (
                    t.owner is None
                    and t.started_at is not None
                    and time.time() - t.started_at < _SETUP_GRACE_S
                )
                if setting_up or self._owner_alive(frozen):
                    continue
                try:
                    self.storage.set_trial_user_attr(
                        frozen._trial_id, records.STATUS, TrialState.INTERRUPTED.value
                    )
                    self.storage.set_trial_state_values(frozen._trial_id, OptunaState.FAIL)
                except optuna.exceptions.UpdateFinishedTrialError:
                    continue  # its owner finished it, or another process recovered it
                stale.append(t)
        return stale

    def running(self, strata: Sequence[Stratum]) -> list[LedgerTrial]:
        """Trials of ``strata`` still open in the storage, whatever their owner's fate (reads
        only the open ones)."""
        return [self._decode(s, f) for s in strata for f in self._open_frozen(s)]

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

    def alive(self, trial: LedgerTrial) -> bool:
        """Whether a trial is running in a live process: on the owner's host, its process
        exists; elsewhere, its heartbeat is fresh (see `owners.owner_alive`)."""
        if not trial.open:
            return False
        frozen = self.storage.get_trial(self._trial_id(trial.stratum, trial.number))
        return frozen.state is OptunaState.RUNNING and self._owner_alive(frozen)

    def owner_alive(self, trial: LedgerTrial) -> bool:
        """Whether the process that ran a trial (finished or not) still lives: it may still be
        logging the trial to MLflow (its heartbeat is fresh, or on this host its process runs)."""
        return self._owner_alive(
            self.storage.get_trial(self._trial_id(trial.stratum, trial.number))
        )

    @staticmethod
    def _owner_alive(frozen: optuna.trial.FrozenTrial) -> bool:
        beat = Beat.from_stored(frozen.system_attrs.get(_HEARTBEAT))
        return owner_alive(frozen.user_attrs.get(records.OWNER), beat)

    def _open_frozen(self, stratum: Stratum) -> list[optuna.trial.FrozenTrial]:
        try:
            study_id = self._study_id(self._stratum_name(stratum))
        except KeyError:
            return []
        return self.storage.get_all_trials(study_id, deepcopy=False, states=(OptunaState.RUNNING,))

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

    def summary(self) -> StudySummary:
        """Trials done of total, per-stratum counts and bests, and the study's state.

        Raises:
            UsageError: no study of this name is stored.
        """
        return summarize(self)

    # -- throughput probe (`study probe`) ---------------------------------------------------
    # Seconds per step per (batch size, strategy), measured by short untracked runs, kept as
    # one JSON attribute of the study (not trials: they consume no budget and are no results).

    def set_throughput(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store the probe's rows (replacing any stored before), e.g. ``{"batch_size": 128,
        "strategy": "default", "replicas": 1, "seconds_per_step": 0.0021, ...}``; non-finite
        numbers are stored as None.

        Raises:
            UsageError: no study of this name is stored.
        """
        self.require()
        stored = json.dumps([_stored_row(row) for row in rows], allow_nan=False)
        self.storage.set_study_user_attr(self._study_id(self.name), _THROUGHPUT, stored)

    def throughput(self) -> list[dict[str, Any]]:
        """The probe's rows as `set_throughput` stored them (empty when none was stored)."""
        raw = (self._study_attrs(self.name) or {}).get(_THROUGHPUT)
        return [dict(row) for row in json.loads(raw)] if raw else []

    # -- noise-scale pilot (`study noise-scale --study NAME`) -------------------------------
    # A pilot run's gradient noise scale (`study.analysis.pilot.Pilot.to_dict`), kept as one
    # JSON attribute of the study: the report sets it next to the fitted B_noise.

    def set_pilot(self, result: dict[str, Any]) -> None:
        """Store a pilot's result (replacing any stored before): ``batch_size``, ``strategy``,
        ``learning_rate``, ``seed``, ``steps_run``, ``target``, ``at_step``, ``b_simple``,
        ``b_simple_low``, ``b_simple_high`` and ``curve`` (``[step, b_simple, low, high]``
        rows); NaN must already be None.

        Raises:
            UsageError: no study of this name is stored.
            ValueError: a value JSON cannot hold (NaN, infinity, an object).
        """
        self.require()
        stored = json.dumps(result, allow_nan=False)
        self.storage.set_study_user_attr(self._study_id(self.name), _PILOT, stored)

    def pilot(self) -> dict[str, Any] | None:
        """The pilot's result as `set_pilot` stored it, or None when none was stored."""
        raw = (self._study_attrs(self.name) or {}).get(_PILOT)
        return dict(json.loads(raw)) if raw else None

    def set_allocation(self, state: dict[str, Any]) -> None:
        """Store an adaptive allocation's state (its budgets by stratum and its decisions), so
        a resumed run continues its rounds (`study.runner.allocation`)."""
        self.require()
        stored = json.dumps(state, allow_nan=False)
        self.storage.set_study_user_attr(self._study_id(self.name), _ALLOCATION, stored)

    def allocation(self) -> dict[str, Any] | None:
        """The adaptive allocation's state as `set_allocation` stored it, or None."""
        raw = (self._study_attrs(self.name) or {}).get(_ALLOCATION)
        return dict(json.loads(raw)) if raw else None


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


# -- throughput probe (`Ledger.set_throughput`) ------------------------------------------------

#: The study attribute holding the throughput probe's rows.
_THROUGHPUT = "throughput_probe"


def _stored_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A probe row as JSON takes it: numpy scalars as Python numbers, non-finite as None."""
    return {str(k): _stored_value(v) for k, v in row.items()}


def _stored_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _stored_row(value)
    if isinstance(value, (list, tuple)):
        return [_stored_value(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()  # numpy scalar
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- noise-scale pilot (`Ledger.set_pilot`) ----------------------------------------------------

#: The study attribute holding the noise-scale pilot's result (JSON).
_PILOT = "noise_scale_pilot"
#: The study attribute holding an adaptive allocation's state (JSON).
_ALLOCATION = "adaptive_allocation"
