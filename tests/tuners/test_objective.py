"""The objective every tuner minimises."""

from __future__ import annotations

import pytest

from study.config.target import Target
from study.results import Measurement, TrialResult, TrialState
from study.tuners.objective import score

TARGET = Target.parse("val_accuracy>=0.8")


def ended_at(state: TrialState, accuracy: float) -> TrialResult:
    return TrialResult(
        state=state, curve=(Measurement(10, 0, 0.0, 1.0, {"val_accuracy": accuracy}),)
    )


def test_reached_scores_its_steps() -> None:
    assert score(TrialResult(state=TrialState.REACHED, steps_to_target=120), 1000, TARGET) == 120


@pytest.mark.parametrize("state", [TrialState.NOT_REACHED, TrialState.PRUNED])
def test_short_of_the_target_ranks_below_any_reached_trial(state: TrialState) -> None:
    assert score(ended_at(state, 0.6), 1000, TARGET) == pytest.approx(2500.0)
    assert score(ended_at(state, 0.0), 1000, TARGET) == pytest.approx(4000.0)  # capped shortfall
    assert score(ended_at(state, 0.79), 1000, TARGET) > 1000


def test_lower_is_better_targets_measure_the_gap_the_other_way() -> None:
    target = Target.parse("val_loss<=0.5")
    result = TrialResult(
        state=TrialState.NOT_REACHED, curve=(Measurement(5, 0, 0.0, 1.0, {"val_loss": 0.75}),)
    )
    assert score(result, 100, target) == pytest.approx(300.0)


@pytest.mark.parametrize("state", [TrialState.DIVERGED, TrialState.FAILED, TrialState.INFEASIBLE])
def test_broken_trials_score_worst(state: TrialState) -> None:
    assert score(TrialResult(state=state), 1000, TARGET) == 5000.0
