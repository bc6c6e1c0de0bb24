"""Where a study run's wall time goes: phases timed by the threads that spend them.

The process keeps one `Phases` (`PHASES`). The engine adds the time each worker thread spends
in a trial (`Phase.TRIALS`: handing it to a trainer worker until its result is back) and
between trials (`Phase.DECISIONS`: claims, allocation rounds, proposals, recording); the
model's fits made for decisions are counted apart too (`Phase.FITS`, a part of decisions when a
worker thread makes them, or of none when a background thread does). `mark` notes when a
moment first happens (the first trial handed out, the engine's end), so a caller that knows
when the process started can tell the start-up and the closing apart. With ``STUDY_LOG=debug``
``study run`` prints it all as one JSON line (``wall breakdown: {...}``), which
`benchmarks/wall_breakdown.py` reads.

Example: ``with PHASES.timing(Phase.FITS): fit()`` adds the call's wall seconds to ``fits``
and counts one fit.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Iterator


class Phase(str, enum.Enum):
    """A part of a study run's wall time."""

    #: Worker threads inside trials (handed to a trainer worker until the result is back).
    TRIALS = "trials"
    #: Worker threads between trials: claims, allocation rounds, proposals, recording.
    DECISIONS = "decisions"
    #: The model of every trial fitted for a decision (by whichever thread fits it).
    FITS = "fits"
    #: A fit that was not made: the model fitted to the same trials was at hand.
    FITS_KEPT = "fits_kept"
    #: Worker threads waiting for a fit made in the background (`study.tuners.fit_ahead`): the
    #: part of the fits on a worker's path.
    FIT_WAIT = "fit_wait"
    #: The finished study's answers (the closing fit and its answer line).
    ANSWER = "answer"
    #: Waiting at the end for MLflow's queue to be logged.
    MLFLOW_CLOSE = "mlflow_close"


class Mark(str, enum.Enum):
    """A moment of a study run, noted the first time it happens (epoch seconds)."""

    FIRST_TRIAL = "first_trial"
    ENGINE_END = "engine_end"


class Phases:
    """Seconds and counts per `Phase`, and the first time of each `Mark`; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.marks: dict[str, float] = {}

    def add(self, phase: Phase, seconds: float, count: int = 1) -> None:
        """Add ``seconds`` (and ``count`` occurrences) to ``phase``."""
        with self._lock:
            self.seconds[phase.value] = self.seconds.get(phase.value, 0.0) + seconds
            self.counts[phase.value] = self.counts.get(phase.value, 0) + count

    @contextlib.contextmanager
    def timing(self, phase: Phase) -> Iterator[None]:
        """Add the block's wall seconds to ``phase``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(phase, time.perf_counter() - started)

    def mark(self, mark: Mark) -> None:
        """Note the first time ``mark`` happens (later ones are ignored)."""
        with self._lock:
            self.marks.setdefault(mark.value, time.time())

    def snapshot(self) -> dict[str, dict[str, float]]:
        """``{"seconds": ..., "counts": ..., "marks": ...}`` as they stand."""
        with self._lock:
            return {
                "seconds": dict(self.seconds),
                "counts": {k: float(v) for k, v in self.counts.items()},
                "marks": dict(self.marks),
            }


#: The process's phases.
PHASES = Phases()
