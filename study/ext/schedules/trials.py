"""Schedule trials: a study's ``batch_schedule`` trained under ``seeds`` seeds, beside its search.

The search answers "which fixed batch size"; a schedule trial asks whether a batch that grows
with the examples seen (`study.config.schedule`) reaches the same target in fewer steps. Each
seed is one trial of the study's schedule ledger (`study.ext.schedules.ledger`), claimed
atomically by any worker on any host, with heartbeats and recovery as for the search's trials,
trained by the same pool (exact steps to target, the same hold rule) and logged as a nested
MLflow run under the study's run with the schedule as params (``batch_schedule``,
``batch_schedule.learning_rate``, ...). They run once the search's budget is spent (so a run
stopped by ``--max-trials`` leaves them to the next), are never pruned (nothing to race: the
report compares them with the best fixed batch size) and take the study's optimizer with its
default metaparameters other than the learning rate (the schedule's own).

`ScheduleEngine` is the search's `StudyEngine` with one cell (a `ScheduleStratum`), a backend that
proposes the schedule's rate under the trial's seed, and specs from `TrialSpec.with_batch_schedule`.
`trial_source` hands them to ``study run`` (`study.extension.TrialSource`): checked with the
search's first trial, run once the search is done.
"""

from __future__ import annotations

from collections.abc import Callable

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import TrialSpec
from study.ext.schedules.ledger import ScheduleLedger
from study.ext.schedules.section import schedule_strategy, trials_of
from study.extension import TrialSource
from study.ledger import Ledger, Slot
from study.results import Measurement
from study.runner.engine import StudyEngine
from study.runner.failures import FailurePolicy
from study.runner.pool import WorkerPool
from study.runner.progress import Progress
from study.tracking.study_tracker import StudyTracker
from study.tuners.base import History, Proposal, TunerBackend
from study.tuners.registry import Lineup

__all__ = [
    "SCHEDULE_ORIGIN",
    "ScheduleEngine",
    "run_schedule_trials",
    "schedule_spec",
    "trial_source",
]

#: The origin (and tuner) recorded with a schedule trial.
SCHEDULE_ORIGIN = "schedule"


def schedule_spec(config: StudyConfig, seed: int) -> TrialSpec:
    """A schedule trial's spec: the study's trial at its smallest batch size on the schedule's
    strategy, under ``seed``, trained with the schedule."""
    trials = trials_of(config)
    assert trials is not None
    plan = trials.schedule
    anchor = Stratum(config.space.batch_sizes[0], schedule_strategy(config))
    spec = config.trial_spec(anchor, {"learning_rate": plan.learning_rate}, seed=seed)
    return spec.with_batch_schedule(plan)


class ScheduleBackend(TunerBackend):
    """Proposes each slot's schedule trial: the schedule's rate, slot k under seed ``seed + k``."""

    name = SCHEDULE_ORIGIN

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        trials = trials_of(self.config)
        assert trials is not None
        seeds = trials.seed_values(self.config.settings.seed)
        return Proposal(
            tuner=SCHEDULE_ORIGIN,
            params={"learning_rate": trials.schedule.learning_rate},
            origin=SCHEDULE_ORIGIN,
            seed=seeds[slot.number % len(seeds)],
        )


class ScheduleEngine(StudyEngine):
    """The study engine over the schedule trials' one cell (see the module docstring)."""

    def _spec(self, slot: Slot, proposal: Proposal) -> TrialSpec:
        assert proposal.seed is not None
        return schedule_spec(self.config, proposal.seed)

    def _hook(
        self, stratum: Stratum, proposal: Proposal, history: History
    ) -> Callable[[Measurement], bool] | None:
        return None  # never pruned


def run_schedule_trials(
    config: StudyConfig,
    ledger: Ledger,
    tracker: StudyTracker,
    pool: WorkerPool,
    *,
    workers: int = 1,
    live: bool | None = None,
) -> tuple[int, ScheduleEngine | None]:
    """Run the study's schedule trials still to run (none: nothing happens); the exit status
    (as `StudyEngine.run`) and the engine (None without a ``batch_schedule``)."""
    trials = trials_of(config)
    if trials is None:
        return 0, None
    schedules = ScheduleLedger.of(ledger)
    cell = schedules.cell(trials, schedule_strategy(config))
    plan = {cell: trials.seeds}
    schedules.liveness.recover_stale(list(plan))
    if schedules.remaining(cell, plan[cell]) == 0 and not schedules.liveness.running(list(plan)):
        return 0, None
    backend = ScheduleBackend(config, schedules)
    print(
        f"schedule trials: {plan[cell]} seed(s) of batch_schedule "
        f"({', '.join(str(b) for b in trials.schedule.batch_sizes)}) on "
        f"{cell.strategy}",
        flush=True,
    )
    engine = ScheduleEngine(
        config,
        schedules,
        Lineup([backend], backend),
        tracker,
        pool,
        plan,
        Progress.from_ledger(schedules, plan, f"{config.name} schedule", live),
        FailurePolicy(config.tuner.max_consecutive_failures),
    )
    return engine.run(workers), engine


def trial_source(config: StudyConfig) -> TrialSource | None:
    """The study's schedule trials for ``study run`` (None: no ``batch_schedule``): checked
    with the search's first trial (their data in memory, ...), run once the search is done."""
    if trials_of(config) is None:
        return None

    def run(
        ledger: Ledger,
        tracker: StudyTracker,
        pool: WorkerPool,
        *,
        workers: int = 1,
        live: bool | None = None,
    ) -> int:
        status, _ = run_schedule_trials(config, ledger, tracker, pool, workers=workers, live=live)
        return status

    return TrialSource("batch_schedule", schedule_spec(config, config.settings.seed), run)
