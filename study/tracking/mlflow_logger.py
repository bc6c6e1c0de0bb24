"""Logging trials to MLflow with batched calls.

Each trial is one run (nested under its study's parent run when there is one). Params: every
metaparameter, global and per-replica batch, strategy, replicas, workload (plus whatever the
caller adds: tuner, trial number, stratum). Tag ``status``: the trial state.

Metrics, with ``step`` = training step. MLflow's metric tab puts a key in the chart section
named by what precedes its last ``/``, sorts named sections alphabetically and shows keys with
no ``/`` last, so the names put the curves first and the one-point numbers (summary, timing)
last:

- ``curves/train_loss``, ``curves/val_accuracy``, ``curves/val_loss``, ... (every validation
  metric of the workload): what training did;
- ``noise/b_simple``, ``noise/grad_sq``, ``noise/trace_sigma``: the gradient noise scale at
  each evaluation, when the trial measures it (``noise_scale``);
- ``progress/examples``, ``progress/train_seconds``: examples seen and training time;
- ``summary/steps_to_target``, ``summary/steps_run``, ... (`TrialResult.summary_metrics`), one
  point each at the last step;
- ``timing/build_seconds``, ``timing/trace_seconds``, ``timing/train_seconds``,
  ``timing/evaluate_seconds``, ``timing/bookkeeping_seconds``, ``timing/wall_seconds``: where the
  trial's wall time went (`TrialResult.timings`, those measured), one point each at the last step.

The environment becomes tags (``reused``: ``true`` when the trial reused a previous trial's
model and compiled functions). Everything goes in one ``log_batch`` call when it fits (the
metric points in one insert on a SQL store, `study.tracking.metric_rows`); a trial whose run is
not open yet is created whole on a SQL store (`MlflowLogger.create_trials`). The data
the trial trained on (`TrialResult.dataset`) is the run's dataset input
(`study.tracking.dataset_input`).

Run status: a trial that trained is FINISHED whatever its outcome (``pruned`` and
``not_reached`` included; the ``status`` tag tells them apart); only errors are FAILED and only
interrupted trials KILLED (`RUN_STATUS`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.adapters.mlflow_internals import import_sql_store
from study.config.trial import TrialSpec
from study.ledger.records import TIMING_KEYS, TimingSummary
from study.paths import artifact_root, sqlite_file
from study.results import FINE, NOISE, TrialResult, TrialState
from study.tracking.dataset_input import dataset_input, log_dataset
from study.tracking.metric_rows import insert_metrics, sql_store
from study.tracking.run_rows import NewRun, insert_runs
from study.tracking.server import EXPERIMENT_KIND, MODEL_TRAINING
from study.tracking.store_template import seed_new_store

for _name in ("mlflow", "alembic"):
    logging.getLogger(_name).setLevel(logging.WARNING)
# A failing write of the store is logged by MLflow with its traceback, then raised: the
# tracker's one warning says it (`study.tracking.jobs`), and what to do.
logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


_MAX_METRICS_PER_BATCH = 1000
_MAX_PARAMS_PER_BATCH = 100
_MAX_PARAM_LENGTH = 6000

#: MLflow run status of a trial that ended in each state: only errors are FAILED and only
#: interruptions KILLED (MLflow draws both as failures); every trained trial is FINISHED.
RUN_STATUS = {
    TrialState.REACHED: "FINISHED",
    TrialState.NOT_REACHED: "FINISHED",
    TrialState.DIVERGED: "FINISHED",
    TrialState.PRUNED: "FINISHED",
    TrialState.FAILED: "FAILED",
    TrialState.INFEASIBLE: "FAILED",
    TrialState.INTERRUPTED: "KILLED",
}

#: Chart sections (metric key prefixes), in the order MLflow shows them.
CURVES, PROGRESS, SUMMARY, TIMING = "curves", "progress", "summary", "timing"
_PROGRESS_KEYS = ("examples", "train_seconds")


class MlflowLogger:
    """A thin, batched writer on top of `MlflowClient`."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        with _store_lock(uri):  # a new local store is made here (`store_template`)
            seed_new_store(uri)
            self.client = MlflowClient(tracking_uri=uri)
        #: Whether the store takes whole runs in one transaction (`create_trials`).
        self.whole_runs = sql_store(self.client) is not None

    def experiment_id(self, name: str) -> str:
        """The id of experiment ``name``, created (with artifacts under ``mlruns/``) if missing."""
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            if experiment.lifecycle_stage == "deleted":
                self.client.restore_experiment(experiment.experiment_id)
            if EXPERIMENT_KIND not in experiment.tags:
                self.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
            return experiment.experiment_id
        location = artifact_root(self.uri)
        if location:
            location = f"{location}/{name}"
        try:
            return self.client.create_experiment(
                name, artifact_location=location, tags={EXPERIMENT_KIND: MODEL_TRAINING}
            )
        except MlflowException:
            experiment = self.client.get_experiment_by_name(name)  # another process made it
            if experiment is None:
                raise
            return experiment.experiment_id

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        """Set an experiment tag; another process setting it at the same moment (a SQLite
        store then refuses one of the two writes) is no error once the tag is there."""
        try:
            self.client.set_experiment_tag(experiment_id, key, value)
        except MlflowException:
            if key not in self.client.get_experiment(experiment_id).tags:
                raise

    def start_run(
        self,
        experiment_id: str,
        name: str,
        *,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """Create a run (nested under ``parent_run_id`` if given) and return its id."""
        all_tags = dict(tags or {})
        if parent_run_id:
            all_tags["mlflow.parentRunId"] = parent_run_id
        run = self.client.create_run(experiment_id, run_name=name, tags=all_tags)
        return run.info.run_id

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        items = [Param(k, _param_value(v)) for k, v in params.items() if v is not None]
        for i in range(0, len(items), _MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i : i + _MAX_PARAMS_PER_BATCH])

    def log_metrics(self, run_id: str, metrics: list[Metric]) -> None:
        """Log ``metrics`` into ``run_id``: in one insert into a SQL store (`insert_metrics`),
        else in ``log_batch`` calls."""
        if insert_metrics(self.client, run_id, metrics):
            return
        for i in range(0, len(metrics), _MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=metrics[i : i + _MAX_METRICS_PER_BATCH])

    def log_trial(
        self,
        run_id: str,
        spec: TrialSpec,
        result: TrialResult,
        *,
        extra_params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """Log one finished trial into ``run_id`` (params, curve, summary, status) and end it."""
        content = trial_content(spec, result, extra_params=extra_params, tags=tags)
        param_items = list(content.params)
        tag_items = [RunTag(k, v) for k, v in content.tags.items()]
        metrics = list(content.metrics)
        room = _MAX_METRICS_PER_BATCH - len(param_items) - len(tag_items)
        fits = len(param_items) <= _MAX_PARAMS_PER_BATCH and len(tag_items) <= _MAX_PARAMS_PER_BATCH
        if fits and insert_metrics(self.client, run_id, metrics):
            self.client.log_batch(run_id, params=param_items, tags=tag_items)
        elif fits and room > 0:
            self.client.log_batch(
                run_id, metrics=metrics[:room], params=param_items, tags=tag_items
            )
            self.log_metrics(run_id, metrics[room:])
        else:
            for i in range(0, len(param_items), _MAX_PARAMS_PER_BATCH):
                self.client.log_batch(run_id, params=param_items[i : i + _MAX_PARAMS_PER_BATCH])
            self.client.log_batch(run_id, tags=tag_items)
            self.log_metrics(run_id, metrics)
        self._after_trial(run_id, result)
        self.client.set_terminated(run_id, status=content.status)

    def create_trials(
        self, experiment_id: str, runs: list[tuple[NewRun, TrialResult]]
    ) -> list[str] | None:
        """Create whole finished trial runs (`study.tracking.run_rows`; ``runs``: each with its
        trial's result) in one transaction; their ids, or None when the store takes no such
        write (nothing was written)."""
        ids = insert_runs(self.client, experiment_id, [run for run, _ in runs])
        if ids is not None:
            for run_id, (_, result) in zip(ids, runs, strict=True):
                self._after_trial(run_id, result, dataset=False)
        return ids

    def _after_trial(self, run_id: str, result: TrialResult, *, dataset: bool = True) -> None:
        """A trial's error text (``error.txt``) and, with ``dataset``, its data as an input."""
        if result.error:
            self.client.log_text(run_id, result.error, "error.txt")
        if dataset and result.dataset is not None:
            log_dataset(self.client, run_id, dataset_input(result.dataset))


@dataclass(frozen=True)
class TrialContent:
    """What a finished trial's run holds besides what its creation gave it: params, tags
    (``status`` and the environment's), metric points, and the MLflow run status."""

    params: tuple[Param, ...]
    tags: Mapping[str, str]
    metrics: tuple[Metric, ...]
    status: str


def trial_content(
    spec: TrialSpec,
    result: TrialResult,
    *,
    extra_params: Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> TrialContent:
    """The params (every metaparameter, batch per replica, strategy, replicas, workload and
    ``extra_params``), tags (``status``, the environment and ``tags``) and metrics (the curve,
    summary and timing) of a finished trial."""
    params = spec.to_params()
    env = dict(result.environment)
    replicas = env.get("replicas")
    params["replicas"] = replicas
    params["per_replica_batch"] = spec.batch_size // replicas if replicas else None
    params["strategy_resolved"] = env.get("strategy")
    params.update(extra_params or {})
    all_tags = {"status": result.state.value, **{k: _tag_value(v) for k, v in env.items()}}
    all_tags.update({k: str(v) for k, v in (tags or {}).items()})
    return TrialContent(
        params=tuple(Param(k, _param_value(v)) for k, v in params.items() if v is not None),
        tags=all_tags,
        metrics=tuple(curve_metrics(result) + timing_metrics(result)),
        status=RUN_STATUS.get(result.state, "FINISHED"),
    )


def metric_key(name: str) -> str:
    """The MLflow key of a measurement column, e.g. ``val_accuracy`` -> ``curves/val_accuracy``
    and ``examples`` -> ``progress/examples``; gradient-noise columns keep their own section
    (``noise/b_simple``)."""
    if name.startswith(NOISE):
        return name
    return f"{PROGRESS if name in _PROGRESS_KEYS else CURVES}/{name}"


def curve_metrics(result: TrialResult) -> list[Metric]:
    """The measurement curve (step = training step) and the summary numbers, as MLflow metrics
    named by `metric_key` and ``summary/<name>``."""
    now = int(time.time() * 1000)
    metrics: list[Metric] = []
    for m in result.curve:
        for key, value in m.as_row().items():
            if key not in ("step", FINE) and value is not None and math.isfinite(value):
                metrics.append(Metric(metric_key(key), float(value), now, int(m.step)))
    for key, value in result.summary_metrics().items():
        metrics.append(Metric(f"{SUMMARY}/{key}", value, now, int(result.steps_run)))
    return metrics


def timing_metrics(result: TrialResult) -> list[Metric]:
    """Where the trial's wall time went, as ``timing/<part>_seconds`` at the last step.

    Example: timings ``{"train": 0.4, "wall": 0.9}`` give ``timing/train_seconds`` = 0.4 and
    ``timing/wall_seconds`` = 0.9.
    """
    now = int(time.time() * 1000)
    return [
        Metric(f"{TIMING}/{key}_seconds", float(value), now, int(result.steps_run))
        for key, value in result.timings.items()
        if math.isfinite(value)
    ]


def study_timing_metrics(timings: TimingSummary) -> dict[str, float]:
    """A study's timing numbers for its parent run: per part, the seconds summed over the
    timed trials (``timing/total_<part>_seconds``) and their mean per trial
    (``timing/mean_<part>_seconds``), the share of the wall time spent training
    (``timing/train_share``) and how many trials were timed (``timing/trials``).

    Example: 24 trials of 0.8 s wall and 0.1 s training give ``timing/total_wall_seconds`` =
    19.2, ``timing/mean_train_seconds`` = 0.1 and ``timing/train_share`` = 0.125.
    """
    if not timings.trials:
        return {}
    out: dict[str, float] = {f"{TIMING}/trials": float(timings.trials)}
    for key in TIMING_KEYS:
        mean = timings.mean(key)
        if mean is not None:
            out[f"{TIMING}/total_{key}_seconds"] = float(timings.totals[key])
            out[f"{TIMING}/mean_{key}_seconds"] = mean
    if timings.train_share is not None:
        out[f"{TIMING}/train_share"] = timings.train_share
    return out


def summary_points(summary: Mapping[str, Any]) -> list[Metric]:
    """MLflow metrics of `StudyTracker.end_parent`'s ``summary`` (non-finite values left out)."""
    now = int(time.time() * 1000)
    points: list[Metric] = []
    for key, value in summary.items():
        steps = value if isinstance(value, Mapping) else {0: value}
        points += [
            Metric(key, float(v), now, int(step))
            for step, v in steps.items()
            if v is not None and math.isfinite(v)
        ]
    return points


#: The URI schemes of MLflow's SQL stores (a driver may follow: ``postgresql+psycopg``).
_DATABASES = ("sqlite", "postgresql", "mysql", "mssql")


def warm_soon(uri: str) -> threading.Thread | None:
    """Where ``uri`` is a database, import MLflow's SQL store in a thread now (about a second),
    so that the run's tracker, made after the slow preflight, does not wait for it; the thread,
    started, or None."""
    if uri.split(":", 1)[0].split("+", 1)[0].lower() not in _DATABASES:
        return None

    def load() -> None:
        with contextlib.suppress(Exception):  # the client imports it when it needs it
            import_sql_store()

    thread = threading.Thread(target=load, name="study-warm-mlflow", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Hold a file lock next to a local SQLite store (MLflow's table creation is not safe for
    two processes starting at once); no-op for other stores."""
    db = sqlite_file(uri)
    if db is None or not db.parent.is_dir():
        yield
        return
    with open(db.with_name(db.name + ".lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tag_value(value: Any) -> str:
    """A tag's text: booleans as ``true``/``false``, anything else as `str` gives it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:_MAX_PARAM_LENGTH]
