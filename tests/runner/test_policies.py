"""The engine's small collaborators: the failure policy, pruning, budgets and visiting order."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from study.config.space import Stratum
from study.config.study import Allocation
from study.config.studyfile import parse_study
from study.ledger import Ledger, StudyRecord
from study.results import Measurement, TrialResult, TrialState
from study.runner.failures import FailurePolicy
from study.runner.launch import budgets, visiting_order
from study.runner.pruning import Pruning, trial_hook, unbounded_cap

FAILED = TrialResult(state=TrialState.FAILED, error="Traceback\nValueError: boom")
REACHED = TrialResult(state=TrialState.REACHED, steps_to_target=10)


def test_failures_stop_the_study_only_when_consecutive() -> None:
    policy = FailurePolicy(limit=3)
    outcomes = [FAILED, FAILED, REACHED, FAILED, FAILED]
    assert [policy.record(r) for r in outcomes] == [False] * 5
    assert policy.record(FAILED) is True
    assert policy.message == "3 consecutive trials failed; last error: ValueError: boom"
    assert policy.record(REACHED) is True  # once stopped, the study stays stopped


def test_pruning_compares_with_the_best_known(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "p")
    ledger.create(StudyRecord("p", config_text="x"))
    stratum = Stratum(32, "default")
    pruning = Pruning(ledger, refresh=0.0)
    hook = pruning.hook(stratum)
    assert hook(Measurement(10_000, 0, 0.0, 1.0))  # nothing reached yet: go on
    pruning.note(stratum, 120)
    assert hook(Measurement(119, 0, 0.0, 1.0)) and not hook(Measurement(120, 0, 0.0, 1.0))
    pruning.note(stratum, 200)  # a worse result does not raise the bar
    assert pruning.best(stratum) == 120


def test_pruning_with_slack_lets_the_trials_near_the_best_finish(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "p")
    ledger.create(StudyRecord("p", config_text="x"))
    stratum = Stratum(1024, "default")
    pruning = Pruning(ledger, refresh=0.0, slack=1.5)
    hook = pruning.hook(stratum)
    pruning.note(stratum, 60)
    assert hook(Measurement(89, 0, 0.0, 1.0)) and not hook(Measurement(90, 0, 0.0, 1.0))


def test_a_trial_nothing_bounds_stops_at_its_share_of_a_steps_budget(tmp_path: Path) -> None:
    from study.tuners.base import History, Proposal

    ledger = Ledger.open(str(tmp_path / "j.journal"), "p")
    ledger.create(StudyRecord("p", config_text="x"))
    big, small = Stratum(1024, "default"), Stratum(16, "default")
    plain = parse_study(STUDY, "order.yaml")
    config = dataclasses.replace(plain, allocation=Allocation("steps", steps=6000))
    cap = unbounded_cap(config)
    assert cap == 0.5 * 6000 / 6  # half of each of the 6 strata's part
    assert unbounded_cap(plain) == math.inf  # even allocation: no budget of steps
    pruning = Pruning(ledger, refresh=0.0)
    proposal = Proposal(tuner="optuna", params={"learning_rate": 0.1})
    hook = trial_hook(pruning, big, proposal, History(big), cap)
    assert hook(Measurement(499, 0, 0.0, 1.0)) and not hook(Measurement(500, 0, 0.0, 1.0))
    pruning.note(big, 900)  # once the stratum has a best, that is the bar
    assert hook(Measurement(899, 0, 0.0, 1.0)) and not hook(Measurement(900, 0, 0.0, 1.0))
    bounded = History(small, neighbour_steps=((1024, 45.0),))  # 45 x 64 x slack
    hook = trial_hook(pruning, small, proposal, bounded, cap)
    assert hook(Measurement(2000, 0, 0.0, 1.0))  # other batch sizes bound it, not the cap
    assert (
        trial_hook(pruning, big, proposal, History(big))(Measurement(10_000, 0, 0.0, 1.0)) is False
    )
    assert trial_hook(pruning, small, proposal, History(small))(Measurement(10_000, 0, 0.0, 1.0))


STUDY = {
    "name": "order",
    "workload": "tabular",
    "target": "val_accuracy>=0.9",
    "budget": {"max_steps": 100},
    "trials_per_stratum": 2,
    "search_space": {
        "batch_size": [32, 8, 128],
        "learning_rate": {"low": 0.01, "high": 1.0},
        "strategy": ["default", "mirrored:2"],
    },
}


def test_strata_are_visited_by_strategy_then_largest_batch_first() -> None:
    order = visiting_order(parse_study(STUDY, "order.yaml"))
    assert [str(s) for s in order] == [
        "b128/default",
        "b32/default",
        "b8/default",
        "b128/mirrored:2",
        "b32/mirrored:2",
        "b8/mirrored:2",
    ]
    assert list(budgets(order, 8).values()) == [2, 2, 1, 1, 1, 1]
