"""Shared helpers for the runner tests: tiny study files, `study` subprocesses, and readers of
the two stores (the Optuna ledger and MLflow) that a study writes under ``tmp_path/mlruns``.

Every study here is the tabular workload on 1,500 rows with target ``val_accuracy>=0.85``,
which the MLP reaches in about 100 steps at batch 128 and 180 at batch 32 (well inside the
400-step budget), so a trial takes a second or two on a 2-core CPU.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.ledger import Ledger, LedgerTrial, open_storage
from study.results import TrialState
from tests.waiting import wait_until
from tests.zygote import Forked, zygote
from tests.zygote import run as zygote_run

#: Ledger statuses of trials that consume no budget (their slot is run again).
UNCOUNTED = tuple(s.value for s in TrialState if not s.counts())
#: Ledger statuses of finished trials.
FINISHED = tuple(s.value for s in TrialState if s.is_outcome())
#: MLflow run status of a finished trial, by ledger status: every trial that trained is
#: FINISHED (its ``status`` tag says how it ended); only errors are FAILED, interruptions KILLED.
RUN_STATUS = {
    "reached": "FINISHED",
    "not_reached": "FINISHED",
    "diverged": "FINISHED",
    "pruned": "FINISHED",
    "failed": "FAILED",
    "infeasible": "FAILED",
    "interrupted": "KILLED",
}
#: Optuna state of a finished trial, by ledger status.
OPTUNA_STATE = {
    "reached": OptunaState.COMPLETE,
    "not_reached": OptunaState.COMPLETE,
    "diverged": OptunaState.COMPLETE,
    "pruned": OptunaState.PRUNED,
    "failed": OptunaState.FAIL,
    "infeasible": OptunaState.FAIL,
    "interrupted": OptunaState.FAIL,
    "discarded": OptunaState.FAIL,
}

TINY: dict[str, Any] = {
    "name": "tiny",
    "workload": "tabular",
    "workload_options": {"rows": 1500},
    "target": "val_accuracy>=0.85",
    "budget": {"max_steps": 400},
    "eval_every": 10,
    "trials_per_stratum": 3,
    "search_space": {
        "batch_size": [32, 128],
        "learning_rate": {"low": 1.0e-2, "high": 0.3, "scale": "log"},
        "strategy": ["default"],
    },
}


def tiny_study(**overrides: Any) -> dict[str, Any]:
    """`TINY` with top-level keys replaced (``search_space`` and ``tuner`` are merged)."""
    data = copy.deepcopy(TINY)
    for key, value in overrides.items():
        if key in ("search_space", "tuner") and isinstance(value, Mapping):
            data[key] = {**data.get(key, {}), **value}
        else:
            data[key] = value
    return data


def write_study(directory: Path, data: Mapping[str, Any], file: str | None = None) -> Path:
    """Write a study file into ``directory`` (named after the study) and return its path."""
    path = directory / (file or f"{data['name']}.yaml")
    path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# Running `study`


def study_env() -> dict[str, str]:
    """The environment for `study` subprocesses: no inherited store locations."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_study(
    *args: str, cwd: Path, timeout: float = 240, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``study ARGS`` in ``cwd`` (so its default store is ``cwd/mlruns``) and wait, as a
    process of its own forked from the zygote (`tests.zygote`); ``env`` is added to
    `study_env`."""
    return zygote_run(args, cwd=cwd, env=study_env() | dict(env or {}), timeout=timeout)


@dataclass
class Background:
    """A `study` process started in its own session (its process group id is its pid)."""

    process: Forked
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal_group(self, sig: int) -> None:
        os.killpg(os.getpgid(self.pid), sig)

    def wait(self, timeout: float = 240) -> int:
        return self.process.wait(timeout)

    def output(self) -> tuple[str, str]:
        return (
            self.stdout.read_text(encoding="utf-8", errors="replace"),
            self.stderr.read_text(encoding="utf-8", errors="replace"),
        )

    def text(self) -> str:
        """Its standard output and error, one after the other."""
        return "\n".join(self.output())

    def stop(self) -> None:
        """Kill the whole group if it still runs (test clean-up)."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.signal_group(signal.SIGKILL)
            self.process.wait(30)


def start_study(
    *args: str, cwd: Path, tag: str = "study", env: Mapping[str, str] | None = None
) -> Background:
    """Start ``study ARGS`` in ``cwd`` in a session of its own (a process forked from the
    zygote, `tests.zygote`), its output in ``cwd/TAG.out`` and ``cwd/TAG.err``; ``env`` is
    added to `study_env`. The caller stops it (`Background.stop`)."""
    stdout, stderr = cwd / f"{tag}.out", cwd / f"{tag}.err"
    process = zygote().spawn(
        args, cwd=cwd, env=study_env() | dict(env or {}), stdout=stdout, stderr=stderr
    )
    return Background(process, stdout, stderr)


@pytest.fixture
def background() -> Iterator[Callable[..., Background]]:
    """Start ``study ARGS`` in the background (``start(*args, cwd=..., tag=...)``, as
    `start_study`); every process still running at the end of the test is killed with its group.
    """
    started: list[Background] = []

    def start(*args: str, cwd: Path, tag: str = "study") -> Background:
        job = start_study(*args, cwd=cwd, tag=tag)
        started.append(job)
        return job

    yield start
    for job in started:
        job.stop()


def freeze_when(pgid: int, find: Callable[[], Any], confirm: Callable[[Any], bool] = bool) -> Any:
    """Stop process group ``pgid`` (SIGSTOP) once ``find()`` returns something ``confirm``
    accepts, and return it if both still agree once the group has stopped; otherwise let the
    group go on (SIGCONT) and return None. ``confirm`` is asked first while the group runs, so
    the group is stopped only when it is about to be caught: stopping it on every poll would
    starve its background threads (e.g. the one that logs to MLflow) and stretch the trial.
    """
    found = find()
    if not found or not confirm(found):
        return None
    os.killpg(pgid, signal.SIGSTOP)
    wait_until(lambda: group_stopped(pgid), 10, f"process group {pgid} stopped", poll=0.01)
    found = find()  # read again: a write under way when the signal came has landed
    if found and confirm(found):
        return found
    os.killpg(pgid, signal.SIGCONT)
    return None


def group_stopped(pgid: int) -> bool:
    """Whether every live process of group ``pgid`` has stopped (state ``T`` in
    ``/proc/PID/stat``): SIGSTOP is delivered asynchronously, after `os.killpg` returns."""
    states = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after its ')'
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                states.append(fields[0])
    return all(state in ("T", "t") for state in states)


# --------------------------------------------------------------------------------------------
# Reading the stores


@dataclass
class Store:
    """The stores of a study run in directory ``cwd``: by default its local store,
    ``mlruns/optuna.journal`` and ``mlruns/mlflow.db``; ``storage_url`` names an RDB storage
    (``--storage``) instead of the journal, ``uri`` a tracking server (``--tracking-uri``)."""

    cwd: Path
    _storage: Any = field(default=None, repr=False)
    _client: Any = field(default=None, repr=False)
    storage_url: str = ""
    uri: str = ""

    @property
    def root(self) -> Path:
        return self.cwd / "mlruns"

    @property
    def journal(self) -> Path:
        return self.root / "optuna.journal"

    @property
    def tracking_uri(self) -> str:
        return self.uri or f"sqlite:///{self.root / 'mlflow.db'}"

    def started(self) -> bool:
        """Whether the ledger exists yet (an RDB storage always does)."""
        return bool(self.storage_url) or self.journal.exists()

    def storage(self, fresh: bool = False) -> Any:
        """An Optuna storage on the ledger (``fresh``: re-read it from scratch)."""
        if fresh or self._storage is None:
            self._storage = open_storage(self.storage_url or str(self.journal))
        return self._storage

    def ledger(self, name: str, fresh: bool = False) -> Ledger:
        return Ledger(self.storage(fresh), name)

    def trials(
        self, config: Mapping[str, Any], fresh: bool = False
    ) -> dict[str, list[LedgerTrial]]:
        """Every ledger trial of a study by stratum (``"b128/default"``), in trial order."""
        ledger = self.ledger(config["name"], fresh)
        return {str(stratum): ledger.trials(stratum) for stratum in strata(config)}

    def optuna_trials(
        self, config: Mapping[str, Any], fresh: bool = False
    ) -> dict[str, list[FrozenTrial]]:
        """The same trials as Optuna (and optuna-dashboard) sees them, through Optuna's API."""
        storage = self.storage(fresh)
        return {
            str(stratum): optuna.load_study(
                study_name=f"{config['name']}/{stratum}", storage=storage
            ).trials
            for stratum in strata(config)
        }

    def mlflow(self) -> Any:
        """An MLflow client on the store (create it only once a study has made the database)."""
        if self._client is None:
            from mlflow.tracking import MlflowClient

            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    def runs(self, name: str) -> list[Any]:
        """The active MLflow runs of a study's experiment."""
        client = self.mlflow()
        experiment = client.get_experiment_by_name(name)
        assert experiment is not None, f"no MLflow experiment named {name!r}"
        return list(client.search_runs([experiment.experiment_id], max_results=5000))


def run_status(store: Store, config: Mapping[str, Any], stratum: str, number: int) -> str | None:
    """The status of a trial's MLflow run (None: no run yet, or MLflow cannot say right now)."""
    key = trial_key(config["name"], stratum, number)
    try:
        client = store.mlflow()
        experiment = client.get_experiment_by_name(config["name"])
        if experiment is None:
            return None
        runs = client.search_runs(
            [experiment.experiment_id], filter_string=f"tags.`study.trial` = '{key}'"
        )
    except Exception:  # e.g. the database is locked by a stopped process: ask again
        return None
    return runs[0].info.status if runs else None


def running_with_run(
    store: Store,
    config: Mapping[str, Any],
    stratum: str,
    accept: Callable[[LedgerTrial], bool] = bool,
) -> LedgerTrial | None:
    """An open trial of ``stratum`` that started (its tuner is known) and that ``accept``s,
    whose MLflow run shows RUNNING; else None."""
    if not store.started():
        return None
    for t in store.trials(config, fresh=True)[stratum]:
        started = t.open and t.tuner is not None and accept(t)
        if started and run_status(store, config, stratum, t.number) == "RUNNING":
            return t
    return None


def strata(config: Mapping[str, Any]) -> list[Stratum]:
    space = config["search_space"]
    return [Stratum(b, s) for b in space["batch_size"] for s in space.get("strategy", ["auto"])]


def status(t: LedgerTrial) -> str:
    return t.status.value


def counted(trials: list[LedgerTrial]) -> list[LedgerTrial]:
    return [t for t in trials if t.status.counts()]


def trial_key(name: str, stratum: str, number: int) -> str:
    """The key of a trial's MLflow run (tag ``study.trial``)."""
    return f"{name}/{stratum}#{number}"


def assert_budget_spent(by_stratum: Mapping[str, list[LedgerTrial]], per_stratum: int) -> None:
    """Each stratum holds exactly ``per_stratum`` counted trials, all finished, and every
    uncounted trial is closed and not running."""
    for stratum, trials in by_stratum.items():
        kept = counted(trials)
        assert len(kept) == per_stratum, (stratum, Counter(status(t) for t in trials))
        for t in trials:
            assert status(t) in (*FINISHED, *UNCOUNTED), (stratum, t.number, status(t))
            assert not t.open, (stratum, t.number, status(t))


def assert_optuna_mirrors_ledger(store: Store, config: Mapping[str, Any]) -> None:
    """Optuna's own view agrees with the ledger: the state that matches each status, the
    objective of reached trials as the value, every trial's learning rate as an Optuna param."""
    ledger, optuna_view = store.trials(config, fresh=True), store.optuna_trials(config)
    for stratum, trials in ledger.items():
        assert [t.number for t in optuna_view[stratum]] == [t.number for t in trials]
        for t, o in zip(trials, optuna_view[stratum]):
            assert o.state is OPTUNA_STATE[status(t)], (stratum, t.number, status(t), o.state)
            if t.status is TrialState.REACHED:
                assert o.value == t.steps_to_target
            if t.status.is_outcome() and t.status is not TrialState.FAILED:
                assert o.params["learning_rate"] == t.params["learning_rate"]


def assert_mlflow_mirrors_ledger(
    store: Store, config: Mapping[str, Any], by_stratum: Mapping[str, list[LedgerTrial]]
) -> dict[str, Any]:
    """MLflow holds one experiment named after the study, one parent run, and one nested child
    run per trial that started (finished or interrupted), agreeing with the ledger; no run is
    left RUNNING. Returns the child runs by trial key."""
    name = config["name"]
    client = store.mlflow()
    experiments = [e for e in client.search_experiments() if e.name == name]
    assert len(experiments) == 1
    runs = store.runs(name)
    assert [r.info.run_name for r in runs if r.info.status == "RUNNING"] == []
    parents = [r for r in runs if r.data.tags.get("study.role") == "parent"]
    assert len(parents) == 1, [r.info.run_id for r in parents]
    parent = parents[0]
    assert parent.info.run_name == name
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"study.yaml", "environment.json"} <= artifacts

    children = [r for r in runs if r is not parent]
    assert all(r.data.tags.get("mlflow.parentRunId") == parent.info.run_id for r in children)
    assert all(r.data.tags.get("study.role") == "trial" for r in children)
    by_key: dict[str, Any] = {}
    for run in children:
        key = run.data.tags["study.trial"]
        assert key not in by_key, f"two MLflow runs for trial {key}"
        by_key[key] = run

    expected = set()
    for stratum, trials in by_stratum.items():
        for t in trials:
            key = trial_key(name, stratum, t.number)
            if status(t) == "discarded":
                assert key not in by_key, key  # an over-budget claim never ran
                continue
            if status(t) == "interrupted" and key not in by_key:
                continue  # killed before its run reached MLflow
            expected.add(key)
            run = by_key.get(key)
            assert run is not None, f"no MLflow run for finished trial {key}"
            assert run.data.tags["status"] == status(t), key
            assert run.info.status == RUN_STATUS[status(t)], key
            if status(t) == "interrupted":
                continue
            _assert_child_matches(client, run, stratum, t)
    assert set(by_key) == expected
    return by_key


def _assert_child_matches(client: Any, run: Any, stratum: str, t: LedgerTrial) -> None:
    params = run.data.params
    assert params["tuner"] == t.tuner
    assert int(params["trial_number"]) == t.number
    assert params["stratum"] == stratum
    assert int(params["batch_size"]) == t.stratum.batch_size
    assert float(params["optimizer.learning_rate"]) == t.params["learning_rate"]
    assert float(params["hp.learning_rate"]) == t.params["learning_rate"]
    assert run.data.tags["tuner"] == t.tuner
    assert t.result is not None
    curve = t.result.curve
    if not curve:  # e.g. infeasible: nothing was measured
        return
    history = client.get_metric_history(run.info.run_id, "curves/val_accuracy")
    assert [m.step for m in history] == [m.step for m in curve]
    assert [m.value for m in history] == pytest.approx([m.metrics["val_accuracy"] for m in curve])
    assert run.data.metrics["summary/steps_run"] == t.result.steps_run


def best_before(trials: list[LedgerTrial], t: LedgerTrial) -> float:
    """Fewest steps to target among the trials that reached it before ``t`` finished."""
    assert t.finished_at is not None
    steps = [
        o.steps_to_target
        for o in trials
        if o.steps_to_target is not None and (o.finished_at or math.inf) < t.finished_at
    ]
    return float(min(steps)) if steps else math.inf
