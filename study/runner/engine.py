"""The study engine: claims ledger slots, asks a tuner, trains, records, mirrors to MLflow.

Design (Shallue et al.): each (batch size, strategy) is a stratum with its own budget of trials;
inside a stratum the tuners search the learning rate and other metaparameters to minimise steps
to the target. Strata are visited largest batch first, so their best learning rates can seed
the next (smaller) batch size's search. A trial still short of the target after as many steps
as its stratum's best so far can never win: it is stopped (``pruned``).

Crash safety: the ledger (Optuna storage) is written before MLflow, MLflow logging is a mirror
repaired on the next start, and a slot whose process died is marked ``interrupted`` and run again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import optuna
from optuna.trial import TrialState as OptunaState

from study.config.study import StudyConfig
from study.errors import UsageError
from study.ledger import Ledger, Stratum, open_storage, owner_alive, record_params, score
from study.results import Measurement, TrialResult, TrialState
from study.runner.pool import WorkerPool
from study.runner.progress import ProgressDisplay, ProgressState, StratumProgress, summarize
from study.tuners.base import Outcome, Proposal, TunerBackend, clean_params
from study.tuners.optuna_backend import OptunaBackend
from study.tuners.optuna_space import to_optuna_distributions

TUNERS = ("optuna", "keras-tuner", "both")
FINAL = {s.value for s in TrialState if s is not TrialState.RUNNING}
_FINGERPRINT_KEYS = (
    "workload", "workload_options", "model", "target", "budget", "eval_every",
    "optimizer", "schedule", "search_space", "seed",
)  # fmt: skip


@dataclass(frozen=True)
class RunOptions:
    """How to run a study (the CLI flags of ``study run``)."""

    tuner: str = "both"
    trials: int | None = None
    workers: int = 1
    storage: str | None = None
    tracking_uri: str | None = None
    live: bool | None = None

    def __post_init__(self) -> None:
        if self.tuner not in TUNERS:
            raise UsageError(
                f"--tuner: unknown tuner {self.tuner!r}; choose from {', '.join(TUNERS)}"
            )
        if self.trials is not None and self.trials < 1:
            raise UsageError(f"--trials must be >= 1 (got {self.trials})")
        if self.workers < 1:
            raise UsageError(f"--workers must be >= 1 (got {self.workers})")


def fingerprint(config: StudyConfig) -> str:
    """A hash of what defines a study's trials (not its budget or tuner settings)."""
    raw = {k: config.raw.get(k) for k in _FINGERPRINT_KEYS}
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]


def budgets(strata: list[Stratum], total: int) -> dict[Stratum, int]:
    """Split ``total`` trials over strata as evenly as possible (earlier strata get the extra)."""
    base, extra = divmod(total, len(strata))
    return {s: base + (1 if i < extra else 0) for i, s in enumerate(strata)}


def environment_info() -> dict[str, Any]:
    """Package versions and host facts, without importing TensorFlow."""
    packages = {}
    for name in (
        "study",
        "tensorflow",
        "tensorflow-cpu",
        "keras",
        "keras-tuner",
        "optuna",
        "mlflow",
        "numpy",
        "pandas",
    ):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "gpus": _gpus(),
        "packages": packages,
        "tf_config": os.environ.get("TF_CONFIG"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpus() -> list[str]:
    """GPUs as ``nvidia-smi -L`` lists them (empty without an NVIDIA driver)."""
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


class StudyEngine:
    """Runs (or resumes) one study until every stratum's budget is spent."""

    def __init__(self, config: StudyConfig, options: RunOptions) -> None:
        self.config = config
        self.options = options
        self.storage = open_storage(options.storage)
        self.ledger = Ledger(self.storage, config.name)
        self.strata = [
            Stratum(b, s)
            for s in config.space.strategies
            for b in sorted(config.space.batch_sizes, reverse=True)
        ]
        self._stop = threading.Event()
        self._claim_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._full: set[Stratum] = set()
        self._best_cache: dict[Stratum, tuple[float, float]] = {}
        self._consecutive_failures = 0
        self.failure_message: str | None = None
        self.distributions = clean_params(to_optuna_distributions(config.space))
        self._trial_seconds: list[float] = []

    # -- setup ----------------------------------------------------------------------------
    def _setup(self) -> None:
        attrs = self.ledger.ensure_root(
            {
                "kind": "study",
                "config_text": self.config.text,
                "config_source": str(self.config.source),
                "fingerprint": fingerprint(self.config),
                "tuner": self.options.tuner,
                "trials_total": self.options.trials or self.config.total_trials,
                "created": time.time(),
            }
        )
        if attrs.get("fingerprint") != fingerprint(self.config):
            raise UsageError(
                f"study {self.config.name!r} already exists in this storage with a different "
                "workload, target, budget or search space; give the study a new name or use "
                "another --storage"
            )
        total = self.options.trials or int(attrs.get("trials_total") or self.config.total_trials)
        if self.options.trials and self.options.trials != attrs.get("trials_total"):
            self.ledger.set_root_attr("trials_total", self.options.trials)
        self.budgets = budgets(self.strata, total)
        self.studies = {}
        self.optuna = OptunaBackend(self.config, self.ledger)
        for stratum in self.strata:
            self.studies[stratum] = self.ledger.stratum_study(stratum, self.optuna.sampler(stratum))
        self.keras_tuner: TunerBackend | None = None
        if self.options.tuner in ("keras-tuner", "both"):
            from study.runner.worker import quiet_stderr

            with quiet_stderr():
                from study.tuners.keras_tuner_backend import KerasTunerBackend

            self.keras_tuner = KerasTunerBackend(self.config, self.ledger)

    def _setup_tracking(self) -> None:
        from study.tracking.store import tracking_uri
        from study.tracking.study_tracker import StudyTracker

        self.tracker = StudyTracker(tracking_uri(self.options.tracking_uri), self.config.name)
        params = {
            "study": self.config.name,
            "workload": self.config.workload,
            "model": self.config.model or "default",
            "target": str(self.config.target),
            "trials_total": sum(self.budgets.values()),
            "strata": len(self.strata),
            "batch_sizes": list(self.config.space.batch_sizes),
            "strategies": list(self.config.space.strategies),
            "tuner": self.options.tuner,
            "sampler": self.config.tuner.sampler.value,
            "oracle": self.config.tuner.oracle.value,
            "pruning": self.config.tuner.pruning,
        }
        artifacts = {
            "study.yaml": self.config.text,
            "environment.json": json.dumps(environment_info(), indent=2),
        }
        self.tracker.ensure_parent(params, artifacts)

    def _recover(self) -> list[Any]:
        """Fail trials of dead processes and repair MLflow from the ledger."""
        stale = self.ledger.recover_stale(self.strata)
        runs = self.tracker.trial_runs()
        for stratum in self.strata:
            for t in self.ledger.trials(stratum):
                status = t.user_attrs.get("status")
                key = self._key(stratum, t.number)
                run = runs.get(key)
                if status == "interrupted" and run is not None and run.info.status == "RUNNING":
                    self.tracker.submit(lambda r=run.info.run_id: self.tracker.mark_interrupted(r))
                elif status in FINAL and (run is None or run.info.status == "RUNNING"):
                    self._relog(stratum, t, None if run is None else run.info.run_id)
        return stale

    def _relog(self, stratum: Stratum, t: Any, run_id: str | None = None) -> None:
        from study.tracking.study_tracker import result_from_ledger

        params = dict(t.params)
        if "learning_rate" not in params:
            return
        spec = self.config.trial_spec(stratum.batch_size, stratum.strategy, params)
        result = result_from_ledger(t.user_attrs)
        self.tracker.finish_trial(
            self._key(stratum, t.number),
            spec,
            result,
            {
                **self._trial_params(stratum, t.number, t.user_attrs),
                **{f"hp.{k}": v for k, v in params.items()},
            },
            self._trial_tags(stratum, t.number, t.user_attrs),
            run_id=run_id,
        )

    # -- bookkeeping ----------------------------------------------------------------------
    def _key(self, stratum: Stratum, number: int) -> str:
        return f"{stratum.study_name(self.config.name)}#{number}"

    def _trial_params(
        self, stratum: Stratum, number: int, attrs: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "tuner": attrs.get("tuner"),
            "origin": attrs.get("origin"),
            "trial_number": number,
            "stratum": str(stratum),
        }

    def _trial_tags(
        self, stratum: Stratum, number: int, attrs: Mapping[str, Any]
    ) -> dict[str, str]:
        return {
            "mlflow.runName": f"{stratum}#{number}",
            "tuner": str(attrs.get("tuner")),
            "stratum": str(stratum),
            "study.owner": str(attrs.get("owner")),
        }

    def _best(self, stratum: Stratum, refresh_after: float = 5.0) -> float:
        now = time.monotonic()
        with self._state_lock:
            cached = self._best_cache.get(stratum)
        if cached is None or now - cached[1] > refresh_after:
            best = self.ledger.best_steps(stratum)
            with self._state_lock:
                old = self._best_cache.get(stratum, (math.inf, 0))[0]
                self._best_cache[stratum] = (min(best, old), now)
            return min(best, old)
        return cached[0]

    def _note_best(self, stratum: Stratum, steps: float) -> None:
        with self._state_lock:
            old, at = self._best_cache.get(stratum, (math.inf, time.monotonic()))
            self._best_cache[stratum] = (min(old, steps), at)

    # -- scheduling -----------------------------------------------------------------------
    def _claim(self) -> tuple[Stratum, optuna.Study, optuna.Trial] | None:
        with self._claim_lock:
            for stratum in self.strata:
                if stratum in self._full or self._stop.is_set():
                    continue
                budget = self.budgets[stratum]
                if self.ledger.remaining(stratum, budget) == 0:
                    self._full.add(stratum)
                    continue
                trial = self.ledger.claim(self.studies[stratum], budget)
                if trial is None:
                    self._full.add(stratum)
                    continue
                return stratum, self.studies[stratum], trial
        return None

    def _backend(self, number: int) -> TunerBackend:
        if self.options.tuner == "optuna" or self.keras_tuner is None:
            return self.optuna
        if self.options.tuner == "keras-tuner":
            return self.keras_tuner
        return self.optuna if number % 2 == 0 else self.keras_tuner

    def _worker_loop(self) -> None:
        while not self._stop.is_set():
            slot = self._claim()
            if slot is None:
                return
            try:
                self._run_slot(*slot)
            except Exception:
                self._fail_slot(*slot, traceback.format_exc())

    def _fail_slot(
        self, stratum: Stratum, study: optuna.Study, trial: optuna.Trial, error: str
    ) -> None:
        """Record a slot whose proposal or bookkeeping raised as a failed trial."""
        frozen = self.storage.get_trial(trial._trial_id)
        if not frozen.state.is_finished():
            trial.set_user_attr("status", TrialState.FAILED.value)
            trial.set_user_attr("error", error[-4000:])
            study.tell(trial, state=OptunaState.FAIL)
        result = TrialResult(state=TrialState.FAILED, error=error)
        proposal = Proposal(tuner=str(frozen.user_attrs.get("tuner", "unknown")), params={})
        self._after(stratum, trial.number, proposal, math.nan, result)

    def _run_slot(self, stratum: Stratum, study: optuna.Study, trial: optuna.Trial) -> None:
        backend = self._backend(trial.number)
        proposal = backend.propose(stratum, study, trial)
        if proposal is None:
            backend = self.optuna
            proposal = backend.propose(stratum, study, trial)
        if proposal.tuner != OptunaBackend.name:
            record_params(self.storage, trial, proposal.params, self.distributions)
        attrs = {
            "tuner": proposal.tuner,
            "origin": proposal.origin,
            "batch_size": stratum.batch_size,
            "strategy": stratum.strategy,
            **proposal.attrs,
        }
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        attrs["owner"] = trial.user_attrs.get("owner")
        spec = self._spec(stratum, proposal)
        key = self._key(stratum, trial.number)
        self.tracker.start_trial(
            key, f"{stratum}#{trial.number}", self._trial_tags(stratum, trial.number, attrs)
        )
        self._progress_running(stratum, +1)
        hook = self._pruning_hook(stratum) if self.config.tuner.pruning else None
        limit = spec.budget.step_limit(spec.batch_size) or 10_000

        def run() -> Outcome:
            result = self.pool.run(spec, hook)
            objective = score(
                result,
                limit,
                self.config.target.maximize,
                self.config.target.threshold,
                self.config.target.metric,
            )
            return Outcome(result, objective)

        started = time.perf_counter()
        try:
            outcome = backend.execute(proposal, run)
        finally:
            self._progress_running(stratum, -1)
            self._trial_seconds.append(time.perf_counter() - started)
        result = outcome.result
        if self._stop.is_set() and result.state is TrialState.FAILED:
            # Killed by an interrupt, not by its own fault: its slot will be run again.
            self.storage.set_trial_user_attr(trial._trial_id, "status", "interrupted")
            study.tell(trial, state=OptunaState.FAIL)
            self.tracker.finish_trial(
                key,
                spec,
                dataclasses.replace(result, state=TrialState.FAILED, error="interrupted"),
                self._trial_params(stratum, trial.number, attrs),
                {**self._trial_tags(stratum, trial.number, attrs), "status": "interrupted"},
            )
            return
        self.ledger.finish(study, trial, result, outcome.objective, attrs)
        backend.report(proposal, outcome)
        params = self._trial_params(stratum, trial.number, attrs)
        params.update({f"hp.{k}": v for k, v in proposal.params.items()})
        tags = self._trial_tags(stratum, trial.number, attrs)
        self.tracker.finish_trial(key, spec, result, params, tags)
        self._after(stratum, trial.number, proposal, spec.learning_rate, result)

    def _spec(self, stratum: Stratum, proposal: Proposal) -> Any:
        spec = self.config.trial_spec(stratum.batch_size, stratum.strategy, proposal.params)
        if proposal.budget_fraction < 1.0:
            limit = spec.budget.step_limit(spec.batch_size) or 10_000
            budget = dataclasses.replace(
                spec.budget, max_steps=max(1, math.ceil(limit * proposal.budget_fraction))
            )
            spec = dataclasses.replace(spec, budget=budget)
        return spec

    def _pruning_hook(self, stratum: Stratum) -> Any:
        def hook(m: Measurement) -> bool:
            return m.step < self._best(stratum)

        return hook

    def _after(
        self, stratum: Stratum, number: int, proposal: Proposal, lr: float, result: TrialResult
    ) -> None:
        if result.state is TrialState.REACHED and result.steps_to_target is not None:
            self._note_best(stratum, result.steps_to_target)
        with self._state_lock:
            p = self.progress.strata[str(stratum)]
            p.done += 1
            self.progress.done_now += 1
            if result.state is TrialState.REACHED and result.steps_to_target < p.best_steps:
                p.best_steps, p.best_lr = float(result.steps_to_target), lr
            if result.state is TrialState.FAILED:
                self._consecutive_failures += 1
            else:
                self._consecutive_failures = 0
            limit = self.config.tuner.max_consecutive_failures
            if self._consecutive_failures >= limit and not self._stop.is_set():
                last = (result.error or "").strip().splitlines()[-1:] or ["?"]
                self.failure_message = f"{limit} consecutive trials failed; last error: {last[0]}"
                self._stop.set()
        what = result.state.value
        if result.state is TrialState.REACHED:
            what = f"reached at step {result.steps_to_target}"
        elif result.state is TrialState.PRUNED:
            what = f"pruned at step {result.steps_run}"
        elif result.error:
            what += f": {result.error.strip().splitlines()[-1][:160]}"
        self.display.trial_finished(
            f"{stratum}#{number} lr={lr:.3g} ({proposal.tuner}{'/' + proposal.origin if proposal.origin != 'sampler' else ''}): {what}"
        )

    def _progress_running(self, stratum: Stratum, delta: int) -> None:
        with self._state_lock:
            self.progress.strata[str(stratum)].running += delta
        self.display.refresh()

    def _init_progress(self) -> None:
        strata = {}
        done = 0
        for stratum in self.strata:
            p = StratumProgress(budget=self.budgets[stratum])
            for t in self.ledger.counted(self.ledger.trials(stratum)):
                if t.user_attrs.get("status") in FINAL:
                    p.done += 1
                    if (
                        t.user_attrs.get("status") == "reached"
                        and t.user_attrs["steps_to_target"] < p.best_steps
                    ):
                        p.best_steps = float(t.user_attrs["steps_to_target"])
                        p.best_lr = t.params.get("learning_rate")
            done += p.done
            strata[str(stratum)] = p
        self.progress = ProgressState(
            total=sum(self.budgets.values()), done_before=done, strata=strata
        )

    # -- the run --------------------------------------------------------------------------
    def run(self) -> int:
        """Run to completion (or interruption); return the exit status."""
        from study.runner.pool import require_tensorflow

        require_tensorflow()
        self._setup()
        self._setup_tracking()
        stale = self._recover()
        self._init_progress()
        self.display = ProgressDisplay(self.config.name, self.progress, self.options.live)
        if stale:
            print(
                f"marked {len(stale)} interrupted trial(s) failed; their slots run again",
                flush=True,
            )
        status = 0
        threads = [
            threading.Thread(target=self._guarded_loop, name=f"study-worker-{i}", daemon=True)
            for i in range(self.options.workers)
        ]
        self.pool = WorkerPool(self.options.workers)
        try:
            with self.display:
                for t in threads:
                    t.start()
                while any(t.is_alive() for t in threads):
                    for t in threads:
                        t.join(timeout=0.5)
                    self.display.refresh()
        except KeyboardInterrupt:
            self._stop.set()
            self.pool.close()
            for t in threads:
                t.join(timeout=30)
            status = 130
        finally:
            self.pool.close()
        complete = status == 0 and self._complete()
        if self.failure_message:
            print(f"study {self.config.name}: stopped: {self.failure_message}", file=sys.stderr)
            status = 1
        run_status = (
            "FINISHED"
            if complete
            else ("KILLED" if status == 130 else ("FAILED" if status else None))
        )
        if run_status:
            self.tracker.end_parent(run_status, self._summary_metrics())
        self.tracker.close()
        if not self.display.live:  # the live table already shows it
            print(summarize(self.progress.strata))
        seconds = sum(self._trial_seconds)
        if seconds:
            t = self.tracker
            print(
                f"MLflow logging (background thread): {t.busy_seconds:.2f} s wall, "
                f"{t.cpu_seconds:.2f} s CPU = {100 * t.cpu_seconds / seconds:.1f}% of "
                f"{seconds:.1f} s of trials; run `study ui` to browse"
            )
        return status

    def _guarded_loop(self) -> None:
        try:
            self._worker_loop()
        except Exception as exc:
            import traceback

            self.failure_message = f"internal error: {type(exc).__name__}: {exc}"
            traceback.print_exc()
            self._stop.set()

    def _complete(self) -> bool:
        for stratum in self.strata:
            if self.ledger.remaining(stratum, self.budgets[stratum]) > 0:
                return False
            if any(
                t.state is OptunaState.RUNNING and owner_alive(t.user_attrs.get("owner"))
                for t in self.ledger.trials(stratum)
            ):
                return False
        return True

    def _summary_metrics(self) -> dict[str, float]:
        out = {}
        for name, p in self.progress.strata.items():
            if math.isfinite(p.best_steps):
                out[f"best_steps.{name.replace(':', '_')}"] = p.best_steps
        out["trials_done"] = self.progress.done
        return out
