"""Which slot a free worker claims while other trials run (`study.runner.claim_order`): a
stratum with a trial running comes after every other stratum with room, and with pruning, while
no trial of the study has reached the target, a free worker waits for the one running instead
of starting a trial that nothing bounds."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.config.trial import TrialSpec
from study.ledger import Ledger, Slot, StudyRecord
from study.results import Measurement, TrialResult, TrialState
from study.runner.claim_order import running_in
from study.runner.engine import StudyEngine
from study.runner.failures import FailurePolicy
from study.runner.launch import budgets, visiting_order
from study.runner.progress import Progress
from study.tuners.registry import build_lineup
from tests.runner.conftest import tiny_study
from tests.tuners.test_no_duplicates import QuietTracker, SyntheticPool, synthetic

LARGE, MIDDLE, SMALL = (Stratum(b, "default") for b in (256, 128, 32))


def engine_of(
    tmp_path: Path, pool: object = None, tracker: object = None, **tuner: object
) -> StudyEngine:
    data = tiny_study(
        target="val_accuracy>=0.6",
        search_space={"batch_size": [32, 128, 256]},
        tuner={"sampler": "random", **tuner},
    )
    config = parse_study(data, "tiny.yaml")
    ledger = Ledger.open(str(tmp_path / "optuna.journal"), config.name)
    ledger.create(StudyRecord(name=config.name, config_text="x", trials_total=9))
    plan = budgets(visiting_order(config), config.total_trials)
    lineup = build_lineup("optuna", config, ledger)
    progress = Progress.from_ledger(ledger, plan, config.name, live=False)
    return StudyEngine(
        config,
        ledger,
        lineup,
        tracker or QuietTracker(),  # type: ignore[arg-type]
        pool or SyntheticPool(),  # type: ignore[arg-type]
        plan,
        progress,
        FailurePolicy(5),
    )


def reach(engine: StudyEngine, slot: Slot | None, steps: int = 40) -> None:
    """``slot`` recorded as a trial that reached the target in ``steps``."""
    assert slot is not None
    engine.ledger.start(slot, tuner="optuna", origin="sampler")
    result = TrialResult(state=TrialState.REACHED, steps_run=steps, steps_to_target=steps)
    engine.ledger.finish(slot, result, float(steps))
    with engine._active_lock:
        engine._active.pop((slot.stratum, slot.number))


def test_a_free_worker_goes_where_no_trial_is_running(tmp_path: Path) -> None:
    engine = engine_of(tmp_path)
    ledger = engine.ledger
    assert engine.strata == [LARGE, MIDDLE, SMALL]  # the largest batch size is visited first
    reach(engine, engine._claim())  # LARGE#0: every batch size has a bound now
    second = engine._claim()
    assert second is not None and (second.stratum, second.number) == (LARGE, 1)
    third = engine._claim()  # LARGE's first pass (2 of 3) is taken
    assert third is not None and third.stratum == MIDDLE
    assert running_in(ledger, MIDDLE) and running_in(ledger, LARGE)
    assert not running_in(ledger, SMALL)
    fourth = engine._claim()  # MIDDLE runs its first trial: SMALL, where none runs, goes first
    assert fourth is not None and fourth.stratum == SMALL
    reach(engine, third)
    fifth = engine._claim()  # LARGE still runs one, MIDDLE none
    assert fifth is not None and (fifth.stratum, fifth.number) == (MIDDLE, 1)


def test_running_trials_order_the_claims_and_never_leave_a_worker_idle(tmp_path: Path) -> None:
    engine = engine_of(tmp_path)
    reach(engine, engine._claim())
    claimed = [engine._claim() for _ in range(8)]  # nothing else finishes
    assert all(slot is not None for slot in claimed)
    order = [(slot.stratum, slot.number) for slot in claimed if slot is not None]
    assert order[:3] == [(LARGE, 1), (MIDDLE, 0), (SMALL, 0)]
    assert sorted(order, key=str) == sorted(
        [(s, n) for s in (LARGE, MIDDLE, SMALL) for n in range(3) if (s, n) != (LARGE, 0)],
        key=str,
    )
    assert engine._claim() is None


def test_without_pruning_nothing_waits_for_a_bound(tmp_path: Path) -> None:
    engine = engine_of(tmp_path, pruning=False)
    first, second = engine._claim(), engine._claim()  # nothing reached, and no wait
    assert first is not None and second is not None
    assert (first.stratum, second.stratum) == (LARGE, MIDDLE)


class WatchedPool:
    """Synthetic trials, each start recorded with how many trials ran beside it and whether one
    had reached the target; a trial waits a while for another to run beside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.reached = False
        self.starts: list[tuple[int, bool]] = []
        self.together = threading.Event()

    def run(
        self, spec: TrialSpec, hook: Callable[[Measurement], bool] | None = None
    ) -> TrialResult:
        with self.lock:
            self.starts.append((self.running, self.reached))
            self.running += 1
            if self.running > 1:
                self.together.set()
            reached = self.reached
        result = synthetic(spec, hook)
        # Long enough for a second worker to start beside it: it should not before a trial
        # reached the target (the wait times out), and should once one has.
        self.together.wait(10 if reached else 0.5)
        with self.lock:
            self.running -= 1
            self.reached = self.reached or result.state is TrialState.REACHED
        return result

    def close(self) -> None:
        pass


def test_two_workers_run_one_trial_at_a_time_until_one_reaches_the_target(
    tmp_path: Path,
) -> None:
    pool = WatchedPool()
    engine = engine_of(tmp_path, pool)
    try:
        assert engine.run(2) == 0
    finally:
        engine.lineup.close()
    assert len(pool.starts) == 9 and pool.reached
    assert all(beside == 0 for beside, reached in pool.starts if not reached)
    assert any(beside > 0 for beside, _ in pool.starts)  # then both workers train at once
