"""Where a branch evaluates in its window (`study.trainer.branch.evaluation_steps`)."""

from __future__ import annotations

from study.trainer.branch import evaluation_steps


def test_evaluations_spread_over_the_windows_last_quarter_ending_at_its_end() -> None:
    assert evaluation_steps(128, 4) == (104, 112, 120, 128)
    assert evaluation_steps(128, 1) == (128,)
    assert evaluation_steps(10, 4) == (8, 9, 10)  # distinct steps only
    assert evaluation_steps(1, 4) == (1,)
    assert evaluation_steps(3, 0) == (3,)
