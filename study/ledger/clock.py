"""The clock the ledger's liveness reads: `Clock` is anything with ``now()`` (Unix seconds).

The ledger stamps heartbeats and judges them stale by its clock, `SYSTEM_CLOCK` (the wall
clock, `time.time`) unless it was given another; a test gives it a clock it moves by hand, so
that "after the grace" is one call and no test waits on the wall clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """A source of the current time, in Unix seconds."""

    def now(self) -> float: ...


@dataclass(frozen=True)
class SystemClock:
    """The wall clock (`time.time`)."""

    def now(self) -> float:
        return time.time()


#: The clock a ledger reads unless it is given another.
SYSTEM_CLOCK: Clock = SystemClock()
