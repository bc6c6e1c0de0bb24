"""The study ledger: every trial of every tuner, in one Optuna storage.

Layout in the storage: a root Optuna study named after the study (its user attributes hold the
study file and settings) and one Optuna study per stratum, named ``NAME/b{batch}/{strategy}``.
Each trial's user attributes hold what the trainer measured (state, steps to target, the whole
curve), which tuner proposed it, and who ran it. Budgets are enforced through Optuna's atomic
trial numbering, so any number of processes on one storage never exceed a stratum's budget.

Default storage: Optuna's journal file ``mlruns/optuna.journal`` (safe for several processes on
one machine); any Optuna RDB URL (PostgreSQL, MySQL, SQLite) serves several machines.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.errors import UsageError
from study.results import TrialResult, TrialState
from study.tracking.store import store_root

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: Ledger statuses that do not consume a stratum's budget (their slot is run again).
UNCOUNTED = ("interrupted", "discarded")


@dataclass(frozen=True)
class Stratum:
    """A (batch size, strategy) cell of the study design."""

    batch_size: int
    strategy: str

    def study_name(self, study: str) -> str:
        return f"{study}/b{self.batch_size}/{self.strategy}"

    def __str__(self) -> str:
        return f"b{self.batch_size}/{self.strategy}"


def open_storage(url: str | None = None) -> optuna.storages.BaseStorage:
    """The Optuna storage for a URL (RDB URL, or a journal file path; default under mlruns/)."""
    if url and "://" in url:
        try:
            return optuna.storages.RDBStorage(url)
        except Exception as exc:  # any driver or URL error is bad input
            hint = ""
            if "DB access module" in str(exc):
                hint = " (install the driver: pip install -e '.[postgres]' or '.[mysql]')"
            raise UsageError(
                f"--storage: cannot open {url!r}: {str(exc).splitlines()[0]}{hint}"
            ) from None
    path = Path(url) if url else store_root() / "optuna.journal"
    path.parent.mkdir(parents=True, exist_ok=True)
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    return JournalStorage(JournalFileBackend(str(path)))


def owner_id() -> str:
    """Who runs a trial: ``host:pid:start-time`` (the start time guards against pid reuse)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def owner_alive(owner: str | None) -> bool:
    """Whether the process that claimed a trial still runs (other hosts are assumed alive)."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return _process_start(pid) == start


def _process_start(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def score(
    result: TrialResult, step_limit: int, maximize: bool, threshold: float, metric: str
) -> float:
    """The objective a tuner minimises: steps to target, or a penalty that ranks below them.

    Reached: its steps. Not reached or pruned: ``2 * limit * (1 + shortfall)`` with the final
    relative shortfall from the target in [0, 1]. Diverged or failed: ``5 * limit``.
    """
    limit = float(max(1, step_limit))
    if result.state is TrialState.REACHED and result.steps_to_target is not None:
        return float(result.steps_to_target)
    if result.state in (TrialState.NOT_REACHED, TrialState.PRUNED) and result.curve:
        value = result.curve[-1].metrics.get(metric, math.nan)
        scale = max(abs(threshold), 1e-12)
        gap = (threshold - value) / scale if maximize else (value - threshold) / scale
        shortfall = min(1.0, max(0.0, gap)) if math.isfinite(gap) else 1.0
        return 2.0 * limit * (1.0 + shortfall)
    return 5.0 * limit


class Ledger:
    """One study's trials in an Optuna storage."""

    def __init__(self, storage: optuna.storages.BaseStorage, name: str) -> None:
        self.storage = storage
        self.name = name

    # -- the root study -------------------------------------------------------------------
    def root_attrs(self) -> dict[str, Any]:
        try:
            sid = self.storage.get_study_id_from_name(self.name)
        except KeyError:
            return {}
        return self.storage.get_study_user_attrs(sid)

    def ensure_root(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """Create the root study with ``attrs`` if missing; return its (existing) attributes."""
        study = optuna.create_study(storage=self.storage, study_name=self.name, load_if_exists=True)
        current = study.user_attrs
        for key, value in attrs.items():
            if key not in current:
                study.set_user_attr(key, value)
        return self.root_attrs()

    def set_root_attr(self, key: str, value: Any) -> None:
        sid = self.storage.get_study_id_from_name(self.name)
        self.storage.set_study_user_attr(sid, key, value)

    # -- strata ---------------------------------------------------------------------------
    def stratum_study(
        self, stratum: Stratum, sampler: optuna.samplers.BaseSampler | None = None
    ) -> optuna.Study:
        study = optuna.create_study(
            storage=self.storage,
            study_name=stratum.study_name(self.name),
            direction="minimize",
            sampler=sampler,
            load_if_exists=True,
        )
        if "batch_size" not in study.user_attrs:
            study.set_user_attr("batch_size", stratum.batch_size)
            study.set_user_attr("strategy", stratum.strategy)
        return study

    def stratum_attrs(self, stratum: Stratum) -> dict[str, Any]:
        """User attributes of a stratum's study ({} before it exists)."""
        try:
            sid = self.storage.get_study_id_from_name(stratum.study_name(self.name))
        except KeyError:
            return {}
        return self.storage.get_study_user_attrs(sid)

    def trials(self, stratum: Stratum) -> list[FrozenTrial]:
        try:
            sid = self.storage.get_study_id_from_name(stratum.study_name(self.name))
        except KeyError:
            return []
        return self.storage.get_all_trials(sid, deepcopy=False)

    def counted(self, trials: Iterable[FrozenTrial]) -> list[FrozenTrial]:
        """Trials that consume budget: finished or running, not interrupted or discarded."""
        return [t for t in trials if t.user_attrs.get("status") not in UNCOUNTED]

    def claim(self, study: optuna.Study, budget: int) -> optuna.Trial | None:
        """Atomically take the next slot of a stratum, or return None when its budget is spent."""
        trial = study.ask()
        trial.set_user_attr("owner", owner_id())
        trial.set_user_attr("status", TrialState.RUNNING.value)
        earlier = [
            t
            for t in self.storage.get_all_trials(study._study_id, deepcopy=False)
            if t.number < trial.number and t.user_attrs.get("status") not in UNCOUNTED
        ]
        if len(earlier) >= budget:
            trial.set_user_attr("status", "discarded")
            study.tell(trial, state=OptunaState.FAIL)
            return None
        return trial

    def remaining(self, stratum: Stratum, budget: int) -> int:
        return max(0, budget - len(self.counted(self.trials(stratum))))

    def best_steps(self, stratum: Stratum) -> float:
        """Fewest steps to target among the stratum's reached trials (inf if none)."""
        steps = [
            t.user_attrs["steps_to_target"]
            for t in self.trials(stratum)
            if t.user_attrs.get("status") == TrialState.REACHED.value
        ]
        return float(min(steps)) if steps else math.inf

    def recover_stale(self, strata: Iterable[Stratum]) -> list[FrozenTrial]:
        """Mark trials whose process died as failed (status ``interrupted``); return them."""
        stale = []
        for stratum in strata:
            for t in self.trials(stratum):
                owner = t.user_attrs.get("owner")
                fresh = (
                    owner is None
                    and t.datetime_start
                    and (time.time() - t.datetime_start.timestamp() < 60)
                )
                if t.state is OptunaState.RUNNING and not fresh and not owner_alive(owner):
                    self.storage.set_trial_user_attr(t._trial_id, "status", "interrupted")
                    self.storage.set_trial_state_values(t._trial_id, OptunaState.FAIL)
                    stale.append(t)
        return stale

    def finish(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        result: TrialResult,
        objective: float,
        attrs: Mapping[str, Any],
    ) -> None:
        """Record a finished trial (its curve, summary and objective) and close it."""
        for key, value in {**attrs, **result_attrs(result)}.items():
            trial.set_user_attr(key, value)
        if result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
            study.tell(trial, state=OptunaState.FAIL)
        elif result.state is TrialState.PRUNED:
            trial.report(objective, result.steps_run)
            study.tell(trial, state=OptunaState.PRUNED)
        else:
            study.tell(trial, objective)


def record_params(
    storage: optuna.storages.BaseStorage,
    trial: optuna.Trial,
    params: Mapping[str, Any],
    distributions: Mapping[str, optuna.distributions.BaseDistribution],
) -> None:
    """Store params proposed by another tuner in a ledger trial, so Optuna's sampler learns from them."""
    for name, value in params.items():
        dist = distributions.get(name)
        if dist is None:
            continue
        storage.set_trial_param(trial._trial_id, name, dist.to_internal_repr(value), dist)


def result_attrs(result: TrialResult) -> dict[str, Any]:
    """The JSON-friendly attributes of a result stored in the ledger."""
    return {
        "status": result.state.value,
        "steps_to_target": result.steps_to_target,
        "examples_to_target": result.examples_to_target,
        "seconds_to_target": result.seconds_to_target,
        "steps_run": result.steps_run,
        "examples_run": result.examples_run,
        "train_seconds": result.train_seconds,
        "curve": json.dumps([_finite_row(m.as_row()) for m in result.curve]),
        "environment": dict(result.environment),
        "error": (result.error or "")[-4000:] or None,
        "finished_at": time.time(),
    }


def _finite_row(row: Mapping[str, float]) -> dict[str, float | None]:
    return {k: (v if v is not None and math.isfinite(v) else None) for k, v in row.items()}


def curve_rows(trial: FrozenTrial) -> list[dict[str, Any]]:
    """The measurement curve stored with a ledger trial."""
    raw = trial.user_attrs.get("curve")
    return json.loads(raw) if raw else []


def list_studies(storage: optuna.storages.BaseStorage) -> list[str]:
    """Names of the root studies in a storage (stratum studies hold a '/')."""
    return sorted(s.study_name for s in storage.get_all_studies() if "/" not in s.study_name)
