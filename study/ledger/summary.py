"""What `study ls` and `study status` show of a study: trials done of total, per-stratum
counts and bests, where the trials' wall time went, and whether it is running, complete,
incomplete or imported. A pure function of the study's record and trials (`Ledger.summary`
reads them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from study.config.space import Stratum
from study.ledger.records import (
    LedgerTrial,
    StratumSummary,
    StudyRecord,
    StudySummary,
    TimingSummary,
    best_of,
)


def summarize(
    record: StudyRecord,
    trials: Mapping[Stratum, Sequence[LedgerTrial]],
    alive: Callable[[LedgerTrial], bool],
) -> StudySummary:
    """The summary of the study of ``record`` from its ``trials`` by stratum; ``alive`` tells
    whether an open trial's process still runs.

    A trial still open in the storage whose process died is not counted: its slot runs again
    on the next start.
    """
    strata = []
    results = []
    for stratum, stored in trials.items():
        live = {t.number for t in stored if t.open and alive(t)}
        counted = [t for t in stored if t.status.counts() and (not t.open or t.number in live)]
        running = sum(1 for t in counted if t.number in live)
        finished = [t.result for t in counted if t.result is not None]
        results += finished
        strata.append(
            StratumSummary(
                stratum=stratum,
                trials=len(counted) - running,
                running=running,
                statuses=Counter(t.status.value for t in counted),
                best=best_of(counted),
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
        record.name, state, done, total or done, running, tuple(strata), TimingSummary.of(results)
    )
