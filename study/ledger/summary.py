"""What `study ls` and `study status` show of a study: trials done of total, per-stratum
counts and bests, where the trials' wall time went, and whether it is running, complete,
incomplete or imported."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from study.ledger.records import StratumSummary, StudySummary, TimingSummary, best_of

if TYPE_CHECKING:
    from study.ledger.store import Ledger


def summarize(ledger: Ledger) -> StudySummary:
    """The summary of ``ledger``'s study.

    A trial still open in the storage whose process died is not counted: its slot runs again
    on the next start.

    Raises:
        UsageError: no study of this name is stored.
    """
    record = ledger.require()
    strata = []
    results = []
    for stratum in ledger.strata():
        trials = [
            t
            for t in ledger.trials(stratum)
            if t.status.counts() and not (t.open and not ledger.alive(t))
        ]
        running = sum(1 for t in trials if ledger.alive(t))
        finished = [t.result for t in trials if t.result is not None]
        results += finished
        strata.append(
            StratumSummary(
                stratum=stratum,
                trials=len(trials) - running,
                running=running,
                statuses=Counter(t.status.value for t in trials),
                best=best_of(trials),
                timings=TimingSummary.of(finished),
            )
        )
    done = sum(s.trials for s in strata)
    running = sum(s.running for s in strata)
    total = record.trials_total
    state = "running" if running else ("complete" if total and done >= total else "incomplete")
    if record.imported:
        state = "imported"
    return StudySummary(
        ledger.name, state, done, total or done, running, tuple(strata), TimingSummary.of(results)
    )
