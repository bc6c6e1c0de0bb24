"""The other workers of a study, as one worker sees them through the ledger: whether the study
is done, whether another process still runs a trial, and waiting for their last trials.

A worker that finds nothing left to claim while trials are still open waits for them
(`wait_for_others`): it looks at the ledger after `FIRST_POLL_S` seconds, then twice as long
each time, up to a quarter of the heartbeat grace (`poll_delays`), reading only the strata that
still have open trials (one read each: what `recover` closes and what is still open come from
it). A look sooner would find nothing to recover on another host (an owner is taken for dead
only ``grace`` seconds after its last stamp), so a dead host's trial is closed within 1.25
grace, and a trial that ends is noticed within the current delay (2 s, then 4, 8, ...).

Example: with the default heartbeat (interval 10 s, grace 60 s) a worker waiting 30 s for the
last trial looks at 2, 6, 14 and 29 s, then every 15 s; before it looked every 2 s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from study.config.space import Stratum
from study.config.study import Heartbeat
from study.errors import StorageUnavailable
from study.ledger import Ledger, LedgerTrial, Slot
from study.ledger.owners import owner_id

#: A waiting worker's first look at the ledger comes this many seconds after it began waiting
#: (or after one heartbeat interval, if that is shorter).
FIRST_POLL_S = 2.0


def poll_delays(heartbeat: Heartbeat) -> Iterator[float]:
    """The delays between a waiting worker's looks at the ledger: `FIRST_POLL_S` (at most the
    heartbeat interval), doubling up to a quarter of the grace.

    Example: interval 10, grace 60: 2, 4, 8, 15, 15, ...; interval 1, grace 3: 1, 1, ...
    """
    delay = min(FIRST_POLL_S, heartbeat.interval)
    cap = max(delay, heartbeat.grace / 4)
    while True:
        yield delay
        delay = min(cap, 2 * delay)


def open_trials(ledger: Ledger, strata: Sequence[Stratum]) -> set[tuple[Stratum, int]]:
    """(stratum, number) of every trial of ``strata`` still open in the storage."""
    return {(t.stratum, t.number) for t in ledger.liveness.running(strata)}


def others_running(ledger: Ledger, strata: Sequence[Stratum]) -> bool:
    """Whether a live process other than this one still runs a trial of ``strata``."""
    mine = owner_id()
    return any(
        t.owner != mine and ledger.liveness.alive(t) for t in ledger.liveness.running(strata)
    )


def complete(ledger: Ledger, budgets: Mapping[Stratum, int]) -> bool:
    """Whether every stratum's budget is spent and no live process still runs a trial (one
    read of each stratum, none where the last claim just read it: `Ledger.fresh_trials`)."""
    for stratum, budget in budgets.items():
        trials = ledger.fresh_trials(stratum)
        if sum(t.status.counts() for t in trials) < budget:
            return False
        if any(ledger.liveness.alive(t) for t in trials):
            return False
    return True


def wait_for_others(
    ledger: Ledger,
    strata: Sequence[Stratum],
    heartbeat: Heartbeat,
    stop: threading.Event,
    recover: Callable[[Sequence[Stratum]], list[LedgerTrial]],
) -> bool:
    """With every budget taken: wait while trials of ``strata`` are open anywhere, closing
    those whose owner died (``recover``, given the strata to look at), until one of them
    closes (it may have freed a slot) or ``stop`` is set. Whether there was anything to wait
    for (False: nothing is open, the budgets are spent)."""
    seen = open_trials(ledger, strata)
    if not seen:
        return False
    watched = [s for s in strata if any(stratum == s for stratum, _ in seen)]
    delays = poll_delays(heartbeat)
    while not stop.wait(next(delays)):
        recover(watched)  # reads their open trials; `open_trials` reuses the read
        if open_trials(ledger, watched) != seen:
            break
    return True


def beat_loop(
    ledger: Ledger,
    running: Callable[[], list[Slot]],
    heartbeat: Heartbeat,
    done: threading.Event,
) -> None:
    """Stamp this process's ``running()`` trials every ``heartbeat.interval`` until ``done``
    (the engine's heartbeat thread); a failed stamp warns once, a lost storage ends it."""
    warned = False
    while not done.wait(heartbeat.interval):
        for slot in running():
            try:
                ledger.liveness.beat(slot, heartbeat.grace)
            except StorageUnavailable:
                return  # the storage is gone for good: the study stops (`run` says so)
            except Exception as exc:  # a storage hiccup: the next beat may get through
                if not warned:
                    warned = True
                    print(f"study: warning: heartbeat failed: {exc}", flush=True)
