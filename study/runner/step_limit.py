"""A trial's pruning rule as a step limit that its trainer worker checks by itself.

Each of a trial's evaluations asks whether to go on. Asked of the study process, that is a round
trip per evaluation (on the MNIST-1D MLP question 5,165 of them in 56 trials, about a tenth of
the trials' wall time with the worker waiting on a busy parent). The study's own rule needs no
round trip: go on while the step (the crossing's first step while a crossing waits to hold) is
below a limit (`study.runner.pruning.trial_hook`). So the parent sends the limit with the trial
(`LimitedTrial`), sends it again whenever it moves (a better best in the stratum, read from the
ledger or found by another worker thread; `StepLimit.follow`), and the worker compares each
evaluation with the latest one it has (`WorkerLimit`). An ``("exit", None)`` between evaluations
stops the trial as the reply to a measurement did.

Example: ``StepLimit(lambda: 2 * best())`` prunes a trial at twice its stratum's best steps; a
trial run with it sends no measurement to the parent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from study.config.trial import TrialSpec
from study.results import Measurement

__all__ = ["FOLLOW_S", "LimitedTrial", "StepLimit", "WorkerLimit"]

#: How often the parent reads a running trial's limit again (seconds).
FOLLOW_S = 0.05


@dataclass(frozen=True)
class StepLimit:
    """Go on while a measurement's step is below ``limit()`` (read when asked: it may move)."""

    limit: Callable[[], float]

    def __call__(self, m: Measurement) -> bool:
        return m.step < self.limit()

    @classmethod
    def unbounded(cls) -> StepLimit:
        """No pruning: every evaluation goes on."""
        return cls(lambda: math.inf)


@dataclass(frozen=True)
class LimitedTrial:
    """A trial sent with its step limit: ``serial`` tells its limit's updates from a previous
    trial's that arrive late."""

    spec: TrialSpec
    serial: int
    limit: float


class WorkerLimit:
    """The worker's side: the latest limit the parent sent for trial ``serial``.

    Called at each evaluation (a `study.trainer.loop.MeasurementHook`): it first reads what the
    parent sent since (``("limit", (serial, value))``, ``("exit", None)``) without waiting.
    """

    def __init__(self, conn: Any, trial: LimitedTrial) -> None:
        self.conn = conn
        self.serial = trial.serial
        self.limit = trial.limit

    def __call__(self, m: Measurement) -> bool:
        while self.conn.poll(0):
            kind, payload = self.conn.recv()
            if kind == "exit":  # the parent shuts down (Ctrl-C): stop, not as pruned
                raise SystemExit(0)
            if kind == "limit" and payload[0] == self.serial:
                self.limit = payload[1]
        return m.step < self.limit
