"""MLflow calls on one background thread, paused while the tracking server is away.

`BackgroundJobs` runs jobs one at a time, in submission order, on a low-priority daemon thread,
so training never waits for the tracking store. A failing job prints one warning (once per
distinct message) and the next one runs. With ``linger`` each job runs that many seconds after
it was submitted at the earliest (at once while `flush` or `close` waits), so what follows it
meanwhile is known when it runs: the tracker writes a trial that ended within it whole, with
the others ended by then, in one transaction, and a job with a key (`BackgroundJobs.submit`)
that a newer one of the same key follows is dropped.

A job that finds the tracking server unreachable (`is_unreachable`) pauses the queue instead:
one warning line, then the server is probed (`probe`) with jittered exponential backoff (1 s
doubling to 15 s, each wait drawn between half and all of it) while new jobs wait in the
queue; nothing else waits for it. When the server answers again: one line, then ``catch_up``
(the tracker's repair from the ledger: every finished trial missing from MLflow, runs left
RUNNING), then the job that failed again and the queue goes on. Jobs are safe to run after a
catch-up: the tracker logs each trial once (`study.tracking.study_tracker`).

`patiently` does the same for the calls a run makes before its trials start (finding its
experiment and parent run, the repair): they are waited through an absent server for up to
`START_WAIT_S`, so a worker that starts while the server restarts does not die; a local
store that is damaged or whose disk is full ends the run with one line instead
(`study.store_faults.mlflow_fault`).

`close` with the server still away goes on probing it for up to ``wait`` seconds (a run that
ends while the server restarts still logs everything) and, if it still does not answer, drops
what is queued with one line: the next ``study run`` or ``study resume`` logs it from the ledger.

Example: a server killed at 12:00:00 and back at 12:00:40 is found back by about 12:00:45 (the
waits are 1, 2, 4, 8, 15, 15 s at most); the trials that finished meanwhile are in MLflow a
few seconds later, in the same run.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from study.store_faults import mlflow_fault
from study.tracking.server import is_unreachable, probe

#: The first wait and the longest one between two probes of an absent server, in seconds.
FIRST_PROBE_S, LONGEST_PROBE_S = 1.0, 15.0
#: How long a run that ended waits for an absent server to log what it missed, in seconds.
CLOSE_WAIT_S = 60.0
#: How long a starting run waits for a server that stopped answering, in seconds.
START_WAIT_S = 300.0

Job = Callable[[], None]
T = TypeVar("T")


def patiently(
    call: Callable[[], T],
    where: str,
    uri: str,
    *,
    window: float = START_WAIT_S,
    answers: Callable[[], bool] | None = None,
) -> T:
    """``call()``, again once the tracking server answers whenever it raises that the server
    at ``uri`` (``where``: masked) did not (one line each way); its error is raised when the
    server stays away for ``window`` seconds."""
    answers = answers or (lambda: probe(uri) is None)
    rng = random.Random()
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_unreachable(exc):
                fault = mlflow_fault(exc, uri)  # a local store's disk full, or damaged
                if fault is None:
                    raise
                raise fault from None
            since, wait = time.monotonic(), FIRST_PROBE_S
            _say(
                f"study: warning: the MLflow tracking server at {where} stopped answering as "
                f"this run started; waiting for it (up to {window:.0f} s)"
            )
            while not answers():
                if time.monotonic() - since > window:
                    raise
                time.sleep(wait * (0.5 + 0.5 * rng.random()))
                wait = min(2 * wait, LONGEST_PROBE_S)
            _say(
                f"study: the MLflow tracking server at {where} answers again (after "
                f"{time.monotonic() - since:.0f} s)"
            )


class BackgroundJobs:
    """Jobs run one at a time, in submission order, on a low-priority daemon thread; paused
    while the tracking server at ``uri`` is away (see the module docstring). ``where`` names
    it in messages (its password masked); ``catch_up`` runs when it answers again."""

    def __init__(
        self,
        where: str,
        uri: str | None = None,
        *,
        catch_up: Job | None = None,
        answers: Callable[[], bool] | None = None,
        linger: float = 0.0,
    ) -> None:
        self.where, self.uri = where, uri or where
        self.linger = linger
        self.catch_up = catch_up
        self._answers = answers or (lambda: probe(uri or where) is None)
        self.busy_seconds = 0.0
        self.cpu_seconds = 0.0
        self.errors: list[str] = []
        #: How many times the server went away, and whether it is away now.
        self.outages = 0
        self.away = False
        #: Whether the server stayed away until `close`: jobs are dropped (counted).
        self.offline = False
        self.dropped = 0
        self._closing = threading.Event()
        #: Set while a `flush` waits: jobs run at once instead of lingering.
        self._hurry = threading.Event()
        self._flushes = 0
        self._flush_lock = threading.Lock()
        #: The newest submission of each job key (`submit`).
        self._newest: dict[str, int] = {}
        self._submitted = 0
        self._give_up_at = 0.0
        self._random = random.Random()
        #: Each job (None: stop) with when it was submitted (`time.monotonic`).
        self._queue: queue.Queue[tuple[float, Job | None]] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="mlflow-tracker", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # Linux: lower this thread's priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            submitted, job = self._queue.get()
            if job is None:
                self._queue.task_done()
                return
            wait = submitted + self.linger - time.monotonic()
            if wait > 0:
                self._hurry.wait(wait)  # let what follows gather (the module's text)
            try:
                if self.offline:
                    self.dropped += 1
                else:
                    self._run(job)
            finally:
                self._queue.task_done()

    def _run(self, job: Job) -> None:
        """Run ``job``; when it finds the server away, wait for it, catch up and run it again."""
        pending = [job]
        while pending:
            current = pending.pop(0)
            try:
                self._timed(current)
            except Exception as exc:
                if not is_unreachable(exc):
                    self._warn(exc)
                    continue
                if not self._wait_for_server(exc):
                    self.offline = True
                    self.dropped += 1 + len(pending)
                    return
                again = [current] if current is not self.catch_up else []
                pending = [*([self.catch_up] if self.catch_up else []), *again, *pending]

    def _timed(self, job: Job) -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            job()
        finally:
            self.busy_seconds += time.perf_counter() - start
            self.cpu_seconds += time.thread_time() - cpu

    def _wait_for_server(self, exc: Exception) -> bool:
        """Probe the absent server until it answers (True), or until `close` asks and one
        more probe finds it still away (False, with one line)."""
        self.away, self.outages, since = True, self.outages + 1, time.monotonic()
        reason = type(exc.__cause__ or exc.__context__ or exc).__name__
        _say(
            f"study: warning: the MLflow tracking server at {self.where} stopped answering "
            f"({reason}); MLflow logging pauses until it is back (the ledger keeps every trial; "
            "nothing waits for it)"
        )
        wait = FIRST_PROBE_S
        while not self._answers():
            if self._closing.is_set() and time.monotonic() >= self._give_up_at:
                _say(
                    f"study: warning: the MLflow tracking server at {self.where} did not answer "
                    "again before this run ended; the next `study run` or `study resume` logs "
                    "the trials it missed"
                )
                return False
            pause = wait * (0.5 + 0.5 * self._random.random())
            if self._closing.is_set():
                time.sleep(min(pause, max(0.0, self._give_up_at - time.monotonic())))
            else:
                self._closing.wait(pause)
            wait = min(2 * wait, LONGEST_PROBE_S)
        self.away = False
        _say(
            f"study: the MLflow tracking server at {self.where} answers again (after "
            f"{time.monotonic() - since:.0f} s); logging what it missed from the ledger"
        )
        return True

    def _warn(self, exc: Exception) -> None:
        first = str(exc).splitlines()[0] if str(exc) else ""
        fault = mlflow_fault(exc, self.uri)  # a local store's disk full, or damaged
        message = f"MLflow logging failed: {fault or f'{type(exc).__name__}: {first}'}"
        if message not in self.errors:
            self.errors.append(message)
            _say(f"study: warning: {message}")

    def submit(self, job: Job, key: str | None = None) -> None:
        """Queue ``job``; one with a ``key`` is dropped when a newer job of the same key is
        queued before it runs (e.g. a state written whole each time: only the newest counts)."""
        if key is not None:
            with self._flush_lock:
                self._submitted += 1
                serial = self._newest[key] = self._submitted
            inner = job

            def job() -> None:
                if self._newest.get(key) == serial:
                    inner()

        self._queue.put((time.monotonic(), job))

    def flush(self) -> None:
        """Wait until every queued job has run (none lingers meanwhile)."""
        with self._flush_lock:
            self._flushes += 1
            self._hurry.set()
        try:
            self._queue.join()
        finally:
            with self._flush_lock:
                self._flushes -= 1
                if not self._flushes:
                    self._hurry.clear()

    def close(self, wait: float = 0.0) -> None:
        """Run what is queued and stop; with the server away, probe it for up to ``wait``
        seconds more (at least once), then drop what is left."""
        self._give_up_at = time.monotonic() + wait
        self._closing.set()
        self.flush()
        self._queue.put((0.0, None))
        self._thread.join(timeout=30)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
