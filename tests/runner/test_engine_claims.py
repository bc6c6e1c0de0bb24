"""Which slot a free worker claims while other trials run (`StudyEngine._claim`): with pruning,
a stratum whose only trials are still running (nothing there has reached the target, so a second
trial would race nothing of its own stratum's) comes after every other stratum with room."""

from __future__ import annotations

from pathlib import Path

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import Ledger, StudyRecord
from study.results import TrialResult, TrialState
from study.runner.engine import StudyEngine
from study.runner.failures import FailurePolicy
from study.runner.launch import budgets, visiting_order
from study.runner.progress import Progress
from study.runner.pruning import bound_pending
from study.tuners.registry import build_lineup
from tests.runner.conftest import tiny_study
from tests.tuners.test_no_duplicates import QuietTracker, SyntheticPool

LARGE, SMALL = Stratum(128, "default"), Stratum(32, "default")


def engine_of(tmp_path: Path, **tuner: object) -> StudyEngine:
    config = parse_study(tiny_study(tuner={"sampler": "random", **tuner}), "tiny.yaml")
    ledger = Ledger.open(str(tmp_path / "optuna.journal"), config.name)
    ledger.create(StudyRecord(name=config.name, config_text="x", trials_total=6))
    plan = budgets(visiting_order(config), config.total_trials)
    lineup = build_lineup("optuna", config, ledger)
    progress = Progress.from_ledger(ledger, plan, config.name, live=False)
    return StudyEngine(
        config,
        ledger,
        lineup,
        QuietTracker(),  # type: ignore[arg-type]
        SyntheticPool(),  # type: ignore[arg-type]
        plan,
        progress,
        FailurePolicy(5),
    )


def reached(steps: int) -> TrialResult:
    return TrialResult(state=TrialState.REACHED, steps_run=steps, steps_to_target=steps)


def test_a_second_worker_goes_where_no_running_trial_sets_the_bound(tmp_path: Path) -> None:
    engine = engine_of(tmp_path)
    ledger = engine.ledger
    assert engine.strata == [LARGE, SMALL]  # the largest batch size is visited first
    first = engine._claim()
    assert first is not None and first.stratum == LARGE
    assert bound_pending(ledger, LARGE) and not bound_pending(ledger, SMALL)
    second = engine._claim()  # LARGE's first trial runs and nothing there reached the target
    assert second is not None and second.stratum == SMALL
    ledger.start(first, tuner="optuna", origin="sampler")
    ledger.finish(first, reached(40), 40.0)
    assert not bound_pending(ledger, LARGE)  # its best bounds the next trial there
    third = engine._claim()
    assert third is not None and third.stratum == LARGE and third.number == 1


def test_a_pending_bound_only_orders_the_claims_it_never_leaves_a_worker_idle(
    tmp_path: Path,
) -> None:
    engine = engine_of(tmp_path)
    claimed = [engine._claim() for _ in range(6)]  # nothing finishes: every slot is pending
    assert all(slot is not None for slot in claimed)
    order = [(slot.stratum, slot.number) for slot in claimed if slot is not None]
    assert order[:2] == [(LARGE, 0), (SMALL, 0)]
    assert sorted(order, key=str) == sorted(
        [(s, n) for s in (LARGE, SMALL) for n in range(3)], key=str
    )
    assert engine._claim() is None


def test_without_pruning_the_claims_keep_the_visiting_order(tmp_path: Path) -> None:
    engine = engine_of(tmp_path, pruning=False)
    first, second = engine._claim(), engine._claim()
    assert first is not None and second is not None
    assert (first.stratum, second.stratum) == (LARGE, LARGE)
