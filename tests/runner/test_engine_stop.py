"""Ctrl-C while a trial runs: `StudyEngine.run` returns 130 only once every worker thread has
recorded its stopped trial, in the ledger and for MLflow, so that the run's closing (the
tracker's last flush) logs it. Python 3.11 reports a thread ended once a Ctrl-C has
interrupted a `Thread.join` on it, while it still runs; a trial recorded after the tracker
closed stayed RUNNING in MLflow."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from study.config.trial import TrialSpec
from study.ledger import LedgerTrial
from study.results import Measurement, TrialResult, TrialState
from tests.runner.conftest import status
from tests.runner.test_engine_claims import engine_of
from tests.tuners.test_no_duplicates import QuietTracker
from tests.waiting import wait_until


class StoppingPool:
    """A trial that trains until the pool closes, then comes back only once ``returned`` is set
    (the engine's `run` has returned) or ``late`` seconds have passed: a worker that stops
    after the run it belongs to would have closed its MLflow logging."""

    def __init__(self, late: float) -> None:
        self.late = late
        self.running = threading.Event()
        self.closed = threading.Event()
        self.returned = threading.Event()

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None = None
    ) -> TrialResult:
        self.running.set()
        if self.closed.wait(10):
            self.returned.wait(self.late)
        return TrialResult(state=TrialState.FAILED, error="trainer worker died (exit code -9)")

    def close(self) -> None:
        self.closed.set()


def waiting_on_its_workers(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked in a wait (an `Event`'s, a `Thread.join`'s)."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and frame.f_code.co_name in ("wait", "_wait_for_tstate_lock")


class RecordingTracker(QuietTracker):
    """The trials handed to MLflow at their end, and when."""

    def __init__(self) -> None:
        self.finished: list[tuple[LedgerTrial, float]] = []

    def finish_trial(self, trial: LedgerTrial, spec: TrialSpec, result: TrialResult) -> None:
        self.finished.append((trial, time.monotonic()))


@pytest.fixture
def python_ctrl_c() -> Iterator[None]:
    """Python's own Ctrl-C in this process (in a full run's xdist workers SIGINT is ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_returns_once_the_stopped_trial_is_recorded(
    tmp_path: Path, python_ctrl_c: None
) -> None:
    pool, tracker = StoppingPool(late=1.0), RecordingTracker()
    engine = engine_of(tmp_path, pool, tracker)
    main = threading.main_thread()
    assert threading.current_thread() is main  # Ctrl-C lands in the main thread

    def ctrl_c() -> None:
        assert pool.running.wait(30)
        wait_until(lambda: waiting_on_its_workers(main), 30, "the engine waiting on its worker")
        signal.pthread_kill(main.ident or 0, signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    try:
        code = engine.run(1)
        returned = time.monotonic()
        pool.returned.set()
    finally:
        engine.lineup.close()

    assert code == 130
    [(trial, handed)] = tracker.finished
    assert trial.status is TrialState.INTERRUPTED and handed <= returned
    recorded = [t for s in engine.strata for t in engine.ledger.trials(s)]
    assert [status(t) for t in recorded] == ["interrupted"]
    assert not any(t.open for t in recorded)
