"""A pool of trainer workers keyed by device configuration.

`WorkerPool.run` hands a trial to an idle worker whose device configuration matches the trial's
strategy (starting one if needed, retiring an idle one of another configuration when the pool
is full). The study engine prunes with a `study.runner.step_limit.StepLimit`, which the worker
checks at each evaluation itself; any other hook is asked at every measurement.
Thread-safe: the engine runs ``--workers N`` trials at once from N threads.

A ``multi_worker_mirrored:W`` trial runs on a `study.runner.cluster.WorkerGroup` of W
processes instead; the group takes one slot of the pool, serves following trials of the same W
and is replaced after a failure. ``multi_worker_mirrored`` (the environment's ``TF_CONFIG``)
runs in one worker that builds the strategy at start.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from study.config.trial import TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.runner import spawning
from study.runner.cluster import GroupError, WorkerGroup
from study.runner.step_limit import FOLLOW_S, LimitedTrial, StepLimit
from study.strategies import StrategySpec, device_key

if TYPE_CHECKING:  # pragma: no cover
    from study.runner.worker import Job

_START_TIMEOUT_S = 300.0


@dataclass
class _Worker:
    key: str
    process: Any
    conn: Any
    busy: bool = False
    trials: int = 0
    info: dict = field(default_factory=dict)
    serial: int = 0  # trials sent with a step limit

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        self.process.kill()

    def stop(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(("exit", None))
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout)
        self.conn.close()

    def check(self, spec: TrialSpec) -> tuple[str | None, bool]:
        """The worker's answer to a check (None: the trial can run) and whether it lives on."""
        try:
            self.conn.send(("check", spec))
            _kind, problem = self.conn.recv()
            return problem, True
        except (EOFError, OSError, BrokenPipeError):
            self.process.join(1)
            code = self.process.exitcode
            return f"trainer worker died while checking the trial (exit code {code})", False

    def job(self, job: Job) -> tuple[Any, bool]:
        """Run an extension's `Job`; a death returns the worker's exit code (None if unknown)
        and False."""
        try:
            self.conn.send(("job", job))
            _kind, outcome = self.conn.recv()
            return outcome, True
        except (EOFError, OSError, BrokenPipeError):
            self.process.join(1)
            return self.process.exitcode, False

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None
    ) -> tuple[TrialResult, bool]:
        """Run one trial: with a `StepLimit` (or no hook) the worker checks the limit itself,
        sent again when it moves; another hook is asked at every measurement. A death becomes
        a failed result."""
        started = time.monotonic()
        limit = StepLimit.unbounded() if hook is None else hook
        try:
            if isinstance(limit, StepLimit):
                return self._run_limited(spec, limit), True
            self.conn.send(("trial", spec))
            while True:
                kind, payload = self.conn.recv()
                if kind == "measurement":
                    self.conn.send(("prune", bool(limit(payload))))
                    continue
                return payload, True
        except (EOFError, OSError, BrokenPipeError):
            self.process.join(1)
            code = self.process.exitcode
            error = (
                f"trainer worker died during the trial (exit code {code}) after "
                f"{time.monotonic() - started:.1f} s"
            )
            return TrialResult(state=TrialState.FAILED, error=error), False

    def _run_limited(self, spec: TrialSpec, limit: StepLimit) -> TrialResult:
        """The trial with its step limit, followed every `FOLLOW_S` until the result is back."""
        self.serial += 1
        sent = limit.limit()
        self.conn.send(("trial", LimitedTrial(spec, self.serial, sent)))
        while not self.conn.poll(FOLLOW_S):
            now = limit.limit()
            if now != sent:
                self.conn.send(("limit", (self.serial, now)))
                sent = now
        kind, payload = self.conn.recv()
        if kind != "result":
            raise OSError(f"trainer worker sent {kind!r} during a trial with a step limit")
        return payload


class WorkerError(RuntimeError):
    """A worker could not start or died."""


class WorkerPool:
    """At most ``max_workers`` worker processes; consecutive trials of one configuration share one."""

    def __init__(self, max_workers: int = 1) -> None:
        self.max_workers = max(1, max_workers)
        #: TensorFlow threads per worker: the cores split between workers (0: TF's default).
        self.threads_per_worker = (
            max(1, (os.cpu_count() or 1) // self.max_workers) if self.max_workers > 1 else 0
        )
        self._workers: list[_Worker] = []
        self._lock = threading.Condition()
        self._starting = 0
        self._closed = False
        self.started = 0

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker; one still starting is stopped as it comes up (a Ctrl-C or SIGTERM
        closes the pool while trial threads may be starting workers). A worker ignores SIGTERM,
        so one left running would hang the process' exit in `multiprocessing`'s own clean-up,
        which terminates and then joins every live child."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
            self._lock.notify_all()
        for worker in workers:
            worker.stop()

    def pids(self) -> dict[str, tuple[int, ...]]:
        """The process ids of the live workers by configuration (``cpu1``, ``mwm2``, ...); a
        worker group's in task order."""
        with self._lock:
            return {
                w.key: tuple(p.pid for p in w.processes)
                if isinstance(w, WorkerGroup)
                else (w.process.pid,)
                for w in self._workers
            }

    def _acquire(self, strategy: str) -> _Worker | WorkerGroup:
        key = device_key(strategy)
        retired: _Worker | WorkerGroup | None = None
        with self._lock:
            while True:
                if self._closed:
                    raise WorkerError("the worker pool is closed (the run is stopping)")
                self._workers = [w for w in self._workers if w.busy or w.alive()]
                for worker in self._workers:
                    if worker.key == key and not worker.busy:
                        worker.busy = True
                        return worker
                if len(self._workers) + self._starting < self.max_workers:
                    break
                idle = [w for w in self._workers if not w.busy]
                if idle:
                    retired = idle[0]
                    self._workers.remove(retired)
                    break
                self._lock.wait()
            self._starting += 1  # reserve the slot; start the process without holding the lock
        try:
            if retired is not None:
                retired.stop()
            worker = self._spawn(key, StrategySpec.parse(strategy))
        finally:
            with self._lock:
                self._starting -= 1
                self._lock.notify_all()
        with self._lock:
            closed = self._closed
            if not closed:
                worker.busy = True
                self._workers.append(worker)
        if closed:
            worker.stop()
            raise WorkerError("the worker pool is closed (the run is stopping)")
        return worker

    def _spawn(self, key: str, strategy: StrategySpec) -> _Worker | WorkerGroup:
        from study.runner.worker import worker_main

        if strategy.workers:
            # One slot, W processes: their TensorFlow threads split this slot's cores.
            threads = max(1, (os.cpu_count() or 1) // (self.max_workers * strategy.workers))
            with self._lock:
                self.started += strategy.workers
            try:
                return WorkerGroup.start(strategy.workers, threads)
            except GroupError as exc:
                raise WorkerError(str(exc)) from exc
        parent, child = spawning.context().Pipe()
        at_start = str(strategy) if key == "mwm" else None  # auto too, if TF_CONFIG has peers
        process = spawning.process(
            worker_main,
            (child, strategy.logical_cpus, self.threads_per_worker, at_start),
            name=f"study-{key}",
        )
        spawning.start(process)  # not from this trial thread: see `study.runner.spawning`
        child.close()
        with self._lock:
            self.started += 1
        if not parent.poll(_START_TIMEOUT_S):
            process.kill()
            raise WorkerError(f"trainer worker for {key} did not start in {_START_TIMEOUT_S:.0f} s")
        try:
            _kind, info = parent.recv()
        except (EOFError, OSError):  # it died before it could say it was ready
            process.join(5)
            raise WorkerError(
                f"trainer worker for {key} died while starting (exit code {process.exitcode})"
            ) from None
        if info.get("error"):
            process.join(5)
            raise WorkerError(f"trainer worker for {key} failed to start:\n{info['error']}")
        return _Worker(key=key, process=process, conn=parent, info=info)

    def _release(self, worker: _Worker | WorkerGroup, healthy: bool) -> None:
        with self._lock:
            worker.busy = False
            worker.trials += 1
            if not healthy:
                if worker in self._workers:
                    self._workers.remove(worker)
                worker.kill()
            self._lock.notify_all()

    def check(self, spec: TrialSpec) -> str | None:
        """Load the data and build the model of ``spec`` in a worker, without training.

        Returns None if the trial can run, else one line saying why not: a target the model
        does not report (listing those it does), a bad loss or labels, a workload that fails to
        load, a model that fails to build. A worker that cannot start or dies is such a line
        too. The worker (or worker group) is the one later trials of that configuration use.
        """
        try:
            worker = self._acquire(spec.strategy)
        except WorkerError as exc:
            return str(exc).splitlines()[0]
        healthy = False
        try:
            problem, healthy = worker.check(spec)
            return problem
        finally:
            self._release(worker, healthy)

    def prestart(self, spec: TrialSpec) -> list[threading.Thread]:
        """Start the workers the pool has room for, in the background, each checked on ``spec``
        (`check`: its data loaded, its session built and traced): with ``--workers N`` the
        other trial threads then find them ready, instead of each paying its worker's start
        (TensorFlow's runtime, the process's first graph optimisation) inside its first trial.
        A worker that fails to start is dropped: the trial that needs one starts its own and
        says why. Only single-process strategies; returns the threads (to join in tests)."""
        if StrategySpec.parse(spec.strategy).workers:
            return []
        with self._lock:
            room = self.max_workers - len(self._workers) - self._starting
        threads = [
            threading.Thread(
                target=self._start_spare, args=(spec,), daemon=True, name="study-spare"
            )
            for _ in range(max(0, room))
        ]
        for thread in threads:
            thread.start()
        return threads

    def _start_spare(self, spec: TrialSpec) -> None:
        """One more worker for ``spec``'s configuration, if there is room, checked on ``spec``
        and left idle."""
        with self._lock:
            if self._closed or len(self._workers) + self._starting >= self.max_workers:
                return
            self._starting += 1
        worker = None
        try:
            worker = self._spawn(device_key(spec.strategy), StrategySpec.parse(spec.strategy))
        except WorkerError:
            return
        finally:
            with self._lock:
                self._starting -= 1
                closed = self._closed
                if worker is not None and not closed:
                    worker.busy = True
                    self._workers.append(worker)
                self._lock.notify_all()
        if closed:
            worker.stop()
            return
        healthy = False
        try:
            _problem, healthy = worker.check(spec)
        finally:
            self._release(worker, healthy)

    def run_job(self, job: Job) -> Any:
        """Run an extension's `Job` (e.g. a branch trial, `study.ext.branch.jobs`) in a worker
        of its strategy; its outcome, or its failed outcome (`Job.failed`) when the worker
        could not start or died."""
        try:
            worker = self._acquire(job.spec.strategy)
        except WorkerError as exc:
            return job.failed(str(exc))
        if isinstance(worker, WorkerGroup):
            self._release(worker, True)
            return job.failed(f"{job.label} run on one process; use a single-host strategy")
        healthy = False
        try:
            outcome, healthy = worker.job(job)
            if healthy:
                return outcome
            return job.failed(f"trainer worker died (exit code {outcome})")
        finally:
            self._release(worker, healthy)

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None = None
    ) -> TrialResult:
        """Run one trial in a worker (or worker group); a dead worker becomes a ``failed``
        result, never an exception."""
        try:
            worker = self._acquire(spec.strategy)
        except WorkerError as exc:
            return TrialResult(state=TrialState.FAILED, error=str(exc))
        healthy = False
        try:
            result, healthy = worker.run(spec, hook)
            return result
        finally:
            self._release(worker, healthy)
