"""What `study ls` and `study status` show of a study: trials done of total, per-stratum
counts and bests, where the trials' wall time went, and whether it is running, complete,
incomplete or imported. A pure function of the study's record and trials (`Ledger.summary`
reads them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from study.config.space import Stratum
from study.ledger.notes import AllocationState
from study.ledger.records import LedgerTrial, StudyRecord, TimingSummary, best_of


@dataclass(frozen=True)
class StratumSummary:
    """A stratum's counted trials: finished (``trials``), running, per status, the best, and
    where their wall time went."""

    stratum: Stratum
    trials: int
    running: int
    statuses: Mapping[str, int]
    best: LedgerTrial | None
    timings: TimingSummary = field(default_factory=TimingSummary)
    #: Trials whose crossing of the target fell back before one held (`TrialResult.fell_back`).
    fell_back: int = 0

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "stratum": str(self.stratum),
            "batch_size": self.stratum.batch_size,
            "strategy": self.stratum.strategy,
            "trials": self.trials,
            "running": self.running,
            "statuses": dict(self.statuses),
            "best_steps": best.steps_to_target if best else None,
            "best_learning_rate": best.params.get("learning_rate") if best else None,
            "best_trial": best.number if best else None,
            "best_tuner": best.tuner if best else None,
            "fell_back": self.fell_back,
            "timings": self.timings.to_dict(),
        }


StudyState = Literal["running", "complete", "incomplete", "imported"]
"""A study's state in `study ls` / `study status` and its report: trials running, every trial
done, stopped short of its budget, or imported from another tool."""


@dataclass(frozen=True)
class StudySummary:
    """What `study ls` and `study status` show: trials done of total, state, the strata, and
    where the trials' wall time went."""

    name: str
    state: StudyState
    trials_done: int
    trials_total: int
    running: int
    strata: tuple[StratumSummary, ...]
    timings: TimingSummary = field(default_factory=TimingSummary)
    #: The rule its steps to target follow (`Hold.to_param`; ``off`` for older studies).
    hold: str = "off"
    #: Why its allocation ended before the study's total of trials ("" if it did not): its
    #: training steps are spent (``allocation: {mode: steps}``); ``trials_total`` is then the
    #: trials it gave.
    ended: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.name,
            "state": self.state,
            "trials_done": self.trials_done,
            "trials_total": self.trials_total,
            "running": self.running,
            "target_hold": self.hold,
            "fell_back": sum(s.fell_back for s in self.strata),
            "ended": self.ended,
            "strata": [s.to_dict() for s in self.strata],
            "timings": self.timings.to_dict(),
        }


def summarize(
    record: StudyRecord,
    trials: Mapping[Stratum, Sequence[LedgerTrial]],
    alive: Callable[[LedgerTrial], bool],
    allocation: AllocationState | None = None,
) -> StudySummary:
    """The summary of the study of ``record`` from its ``trials`` by stratum; ``alive`` tells
    whether an open trial's process still runs. An ``allocation`` that ended before its total
    (`AllocationState.closed`) makes the trials it gave the study's total.

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
                fell_back=sum(1 for r in finished if r.fell_back),
            )
        )
    done = sum(s.trials for s in strata)
    running = sum(s.running for s in strata)
    total = record.trials_total
    ended = allocation.closed if allocation is not None else ""
    if ended:
        total = sum(allocation.budgets.values())  # type: ignore[union-attr]
    state: StudyState = (
        "running" if running else ("complete" if total and done >= total else "incomplete")
    )
    if record.imported:
        state = "imported"
    return StudySummary(
        record.name,
        state,
        done,
        total or done,
        running,
        tuple(strata),
        TimingSummary.of(results),
        hold=record.hold_rule.to_param(),
        ended=ended,
    )
