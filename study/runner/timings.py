"""A trial's wall time and its parts: the trainer's measured parts completed with the wall time
the engine measured around the trial and the ``bookkeeping`` remainder (`account`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

from study.results import TIMING_PARTS, WALL, TrialResult

BOOKKEEPING = "bookkeeping"
#: The parts of a trial's wall time the trainer measures (the rest is bookkeeping).
TRAINER_PARTS = tuple(p for p in TIMING_PARTS if p != BOOKKEEPING)


def account(timings: Mapping[str, float], wall: float) -> dict[str, float]:
    """A trial's timings completed with its ``wall`` time and the ``bookkeeping`` remainder.

    Bookkeeping is the wall time minus the trainer's parts (build, trace, train, evaluate),
    never negative; it is left out when the trainer measured none of them (then only the
    wall time is known). Other keys are kept.

    Example: wall 1.0 with build 0.1, trace 0.2, train 0.5, evaluate 0.1 gives bookkeeping 0.1;
    wall 1.0 with no parts gives ``{"wall": 1.0}``.
    """
    out = {k: float(v) for k, v in timings.items() if k not in (BOOKKEEPING, WALL)}
    measured = [out[p] for p in TRAINER_PARTS if p in out]
    if measured:
        out[BOOKKEEPING] = max(0.0, wall - sum(measured))
    out[WALL] = wall
    return out


def timed(result: TrialResult, started: float) -> TrialResult:
    """``result`` with its timings completed by `account`, the wall time ending now."""
    wall = time.perf_counter() - started
    return dataclasses.replace(result, timings=account(result.timings, wall))


__all__ = ["BOOKKEEPING", "TRAINER_PARTS", "account", "timed"]
