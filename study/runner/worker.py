"""The trainer worker: one process, one TensorFlow runtime, one device configuration.

TensorFlow fixes its logical devices when it initialises and cannot host MirroredStrategy
instances over different device sets, so each worker is started for one configuration (its
number of logical CPUs) and reuses its runtime, strategies and generated data across trials.
Each trial's result carries the description of its data (`study.workloads.describe`: name,
source, digest, rows), made once per dataset when the worker loads it.
A multi-worker worker (one member of a `study.runner.cluster.WorkerGroup`, or one host of a
real cluster) sets ``TF_CONFIG`` and builds its `MultiWorkerMirroredStrategy` first, before
TensorFlow initialises: collective ops can only be configured at program start.

It also keeps the last trial's model, optimizer and compiled functions (a
`study.trainer.session.SessionCache`): a following trial with the same model, batch size,
strategy and optimizer re-initialises them instead of building and tracing anew.

Protocol over a `multiprocessing` pipe (parent -> worker: ``("trial", spec)`` (each
measurement is sent and waits for ``("prune", bool)``), ``("trial", LimitedTrial)`` (the worker
checks the step limit itself; ``("limit", (serial, value))`` moves it,
`study.runner.step_limit`), ``("check", spec)``, ``("job", job)`` (work an extension sends
besides trials, a `Job`), ``("exit", None)``; worker -> parent: ``("ready", info)``,
``("measurement", m)``, ``("result", result)``, ``("checked", None | "one-line error")``).
A check loads the data and builds the model once without training: it finds a target the
model does not report, a bad loss or labels, a missing file before a study records anything.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, Protocol

from study.config.trial import TrialSpec
from study.deps import quiet_stderr, without_keras_extras
from study.errors import InfeasibleError, UsageError, summary_line
from study.results import DataDescription, ErrorKind, TrialResult, TrialState
from study.runner.step_limit import LimitedTrial, WorkerLimit
from study.strategies import StrategyKind


class Job(Protocol):
    """Work besides a trial that an extension sends a worker (`WorkerPool.run_job`; it travels
    pickled), e.g. a branch trial's reference run or branch (`study.ext.branch.jobs`). The
    worker imports ``runner`` (``module:function``) and calls ``function(job, data, build,
    strategy, resolved, task=..., cache=...)`` with ``spec``'s data, model builder, strategy,
    its resolution and the workload's task, and its session cache; the outcome goes back."""

    spec: TrialSpec
    #: What such jobs are, in an error ("branch trials").
    label: ClassVar[str]
    #: The function that runs it in a worker, ``module:function``.
    runner: ClassVar[str]

    def failed(self, error: str) -> Any:
        """The outcome of the job that failed with ``error``."""


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when its parent dies (no orphan keeps training)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:  # pragma: no cover - not glibc
            pass


class _Runtime:
    """TensorFlow, strategies and datasets, created once per worker and reused."""

    def __init__(
        self, logical_cpus: int, threads: int = 0, start_strategy: str | None = None
    ) -> None:
        with quiet_stderr(), without_keras_extras():
            import tensorflow as tf

        from study.strategies import configure_devices, probe_host

        self.tf = tf
        tf.get_logger().setLevel("ERROR")  # one new tf.function per trial is expected
        configure_devices(tf, logical_cpus)
        if threads:  # several workers share the cores: don't oversubscribe them
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        self.host = probe_host(tf)
        tf.config.experimental.enable_op_determinism()
        self._strategies: dict[str, Any] = {}
        if start_strategy is not None:  # before anything initialises TensorFlow's context
            self.strategy(start_strategy)
        self._data: dict[tuple, Any] = {}
        self._described: dict[tuple, DataDescription | None] = {}
        from study.trainer.session import SessionCache

        self.sessions = SessionCache()

    def strategy(self, name: str) -> tuple[Any, Any]:
        from study.strategies import build_strategy, resolve

        if name not in self._strategies:
            resolved = resolve(name, self.host)
            # Names that resolve alike share one strategy (auto and multi_worker_mirrored on a
            # cluster: a process can build only one multi-worker strategy).
            built = next(
                (
                    s
                    for s, r in self._strategies.values()
                    if (r.kind, r.devices, r.replicas)
                    == (resolved.kind, resolved.devices, resolved.replicas)
                ),
                None,
            )
            strategy = built if built is not None else build_strategy(self.tf, resolved)
            self._strategies[name] = (strategy, resolved)
        return self._strategies[name]

    def dataset(self, spec: TrialSpec) -> tuple[Any, Any]:
        from study.workloads import get_workload
        from study.workloads.resolve import option_fields

        key = self._data_key(spec)
        if key not in self._data:
            with option_fields():  # an option's error is on workload_options.<option>
                workload = get_workload(spec.workload, spec.workload_options)
                data = workload.load()
            self._data[key] = (workload, data)
            self._described[key] = _described(workload, data)
        return self._data[key]

    @staticmethod
    def _data_key(spec: TrialSpec) -> tuple:
        return (
            spec.workload,
            tuple(sorted((k, repr(v)) for k, v in spec.workload_options.items())),
        )

    def run(self, spec: TrialSpec, hook: Any) -> TrialResult:
        """Train one trial; its result carries the description of its data."""
        result = self._train(spec, hook)
        return replace(result, dataset=self._described.get(self._data_key(spec)))

    def _train(self, spec: TrialSpec, hook: Any) -> TrialResult:
        from study.trainer.loop import train

        data, build, strategy, resolved, task = self._trained_on(spec)
        return train(
            spec, data, build, strategy, resolved, hook=hook, task=task, cache=self.sessions
        )

    def job(self, job: Job) -> Any:
        """Run an extension's `Job` (its ``runner``) on its spec's data, model and strategy."""
        import importlib

        module, _, name = job.runner.partition(":")
        run = getattr(importlib.import_module(module), name)
        data, build, strategy, resolved, task = self._trained_on(job.spec)
        return run(job, data, build, strategy, resolved, task=task, cache=self.sessions)

    def _trained_on(self, spec: TrialSpec) -> tuple[Any, Callable[[], Any], Any, Any, Any]:
        """What ``spec`` trains on here: its data, its model's builder, the strategy and its
        resolution, the workload's task."""
        strategy, resolved = self.strategy(spec.strategy)
        workload, data = self.dataset(spec)
        model_name = workload.check_model(spec.model)
        return data, lambda: workload.build(model_name, data), strategy, resolved, workload.task

    def check(self, spec: TrialSpec) -> None:
        """Load the data and build the model once, untrained; raise `UsageError` on bad input.

        A strategy this host cannot provide is no bad input (its trials are recorded
        ``infeasible``): the model is then checked on the default strategy. A trial that can
        run here is then made ready (`warm`): its session is built and traced once, before any
        trial's clock, and the first trial re-initialises it as every following one does.
        """
        from study.strategies import check_batch_divisible
        from study.trainer.session import check_trial

        feasible = True
        try:
            strategy, resolved = self.strategy(spec.strategy)
        except InfeasibleError:
            strategy, resolved = self.strategy("default")
            feasible = False
        replicas = strategy.num_replicas_in_sync
        check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
        workload, data = self.dataset(spec)
        model_name = workload.check_model(spec.model)
        build = lambda: workload.build(model_name, data)  # noqa: E731
        check_trial(spec, data, build, strategy, resolved, workload.task)
        if feasible and resolved.kind is not StrategyKind.MULTI_WORKER_MIRRORED:
            self.warm(spec, data, build, strategy, resolved, workload.task)

    def warm(self, spec: TrialSpec, *session_args: Any) -> None:
        """Build, trace and keep the session ``spec`` needs (the study's one-time warm-up: the
        first graph optimisation in a process costs ~1 s here, once)."""
        from study.trainer.session import open_session

        data, build, strategy, resolved, task = session_args
        open_session(spec, data, build, strategy, resolved, task, self.sessions)


def _described(workload: Any, data: Any) -> DataDescription | None:
    """The description of the data (`study.workloads.describe`); None if it cannot be made: a
    description never fails a trial."""
    from study.workloads.describe import describe_data

    try:
        return describe_data(workload, data)
    except Exception as exc:  # user data of an unexpected kind
        print(f"study: warning: could not describe the data: {exc}", file=sys.stderr)
        return None


def run_trial_safely(runtime: _Runtime, spec: TrialSpec, hook: Any) -> TrialResult:
    """Run one trial; never raise: errors become ``infeasible`` or ``failed`` results."""
    try:
        return runtime.run(spec, hook)
    except InfeasibleError as exc:
        return TrialResult(TrialState.INFEASIBLE, error=str(exc), error_kind=ErrorKind.INFEASIBLE)
    except UsageError as exc:
        return TrialResult(TrialState.FAILED, error=str(exc), error_kind=ErrorKind.USAGE)
    except Exception:
        return TrialResult(
            TrialState.FAILED, error=traceback.format_exc(), error_kind=ErrorKind.CRASH
        )


def job_safely(runtime: _Runtime, job: Job) -> Any:
    """Run an extension's job; never raise: an error becomes its failed outcome."""
    try:
        return runtime.job(job)
    except UsageError as exc:
        return job.failed(str(exc))
    except Exception:
        return job.failed(traceback.format_exc())


def check_safely(runtime: _Runtime, spec: TrialSpec) -> str | None:
    """Check one trial; None if it can run, else one line saying why not (never raises)."""
    try:
        runtime.check(spec)
    except UsageError as exc:
        return str(exc)
    except Exception as exc:  # user code (load, build) failing is a bad workload or model
        return summary_line(exc)
    return None


def worker_main(
    conn: Any,
    logical_cpus: int,
    threads: int = 0,
    start_strategy: str | None = None,
    tf_config: str | None = None,
) -> None:
    """Entry point of a worker process.

    Args:
        start_strategy: a strategy to build before TensorFlow initialises (a multi-worker one);
            only trials of that strategy may then be sent.
        tf_config: the ``TF_CONFIG`` of this process (a member of a worker group); None keeps
            the environment's.
    """
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C does
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # and what SIGTERM to the group does
    if tf_config is not None:
        os.environ["TF_CONFIG"] = tf_config
    try:
        runtime = _Runtime(logical_cpus, threads, start_strategy)
    except Exception:
        conn.send(("ready", {"error": traceback.format_exc()}))
        return
    conn.send(
        (
            "ready",
            {
                "gpus": runtime.host.gpus,
                "logical_cpus": logical_cpus,
                "workers": runtime.host.workers,
            },
        )
    )

    def hook(measurement: Any) -> bool:
        conn.send(("measurement", measurement))
        kind, keep_going = conn.recv()
        if kind == "exit":  # the parent shuts down (Ctrl-C): stop the trial, do not call it pruned
            raise SystemExit(0)
        return kind == "prune" and bool(keep_going)

    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "exit":
            return
        if kind == "check":
            conn.send(("checked", check_safely(runtime, payload)))
            continue
        if kind == "job":
            conn.send(("result", job_safely(runtime, payload)))
            continue
        if kind == "limit":  # a finished trial's limit, sent as it ended
            continue
        if isinstance(payload, LimitedTrial):
            result = run_trial_safely(runtime, payload.spec, WorkerLimit(conn, payload))
        else:
            result = run_trial_safely(runtime, payload, hook)
        conn.send(("result", result))
