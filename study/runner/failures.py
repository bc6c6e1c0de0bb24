"""When failing trials stop a study: after N consecutive failures (KerasTuner's rule).

One failed trial never stops a study (it is recorded and the next slot runs); a run of
``limit`` failures in a row means something is wrong with the study itself, so it stops with
the last error.
"""

from __future__ import annotations

import threading

from study.results import TrialResult, TrialState


class FailurePolicy:
    """Counts consecutive failed trials; `record` says when the study must stop.

    Example: with ``limit=3``, results failed, failed, reached, failed, failed, failed stop the
    study at the sixth.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.consecutive = 0
        self.message: str | None = None
        self._lock = threading.Lock()

    def record(self, result: TrialResult) -> bool:
        """Count one finished trial; True once the study must stop (`message` says why)."""
        with self._lock:
            self.consecutive = self.consecutive + 1 if result.state is TrialState.FAILED else 0
            if self.consecutive >= self.limit and self.message is None:
                last = (result.error or "").strip().splitlines()[-1:] or ["?"]
                self.message = f"{self.limit} consecutive trials failed; last error: {last[0]}"
            return self.message is not None

    def stop(self, message: str) -> None:
        """Stop the study for a reason of its own (e.g. an internal error)."""
        with self._lock:
            self.message = message
