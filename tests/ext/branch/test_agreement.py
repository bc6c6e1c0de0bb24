"""CBS(t) next to the study's answers (`study.ext.branch.agreement`): B_noise scaled to the
branches' tolerance, agreement when the intervals share a point, and where they do not, the
reason that fits (censored, an early last checkpoint, a trained state)."""

from __future__ import annotations

import math

import pytest

from study.analysis.answers import Answer
from study.ext.branch.agreement import agreement, answer_triple, at_tolerance, overlap

PLAN = {"batch_sizes": [16, 128, 1024], "target_examples": 26480}


def row(cbs: float, low: float, high: float, examples: int = 26480, censored: bool = False):
    return {"cbs": cbs, "cbs_low": low, "cbs_high": high, "examples": examples,
            "censored": censored}  # fmt: skip


def test_b_noise_at_the_tolerance_is_the_batch_needing_1_over_1_minus_tol_the_examples() -> None:
    assert at_tolerance((500.0, 400.0, 600.0), 0.5) == (500.0, 400.0, 600.0)
    assert at_tolerance((500.0, 400.0, 600.0), 0.2) == pytest.approx((125.0, 100.0, 150.0))
    assert overlap((1, 0, 2), (3, 2, 4)) and not overlap((1, 0, 2), (3, 2.5, 4))


def test_overlapping_intervals_agree_and_say_the_ratio() -> None:
    lines = agreement(row(450, 300, 700), PLAN, (497, 432, 568), (459, 296, 539), (0.5, "progress"))
    assert len(lines) == 1
    assert "agrees with the study's B_noise 497 (432 to 568)" in lines[0]
    assert "agrees with the study's critical batch size 459 (296 to 539)" in lines[0]
    assert "at its target, 26,480 examples" in lines[0]


def test_a_smaller_tolerance_compares_with_b_noise_scaled_to_it() -> None:
    lines = agreement(row(120, 100, 150), PLAN, (500, 400, 600), None, (0.2, "progress"))
    assert "B_noise x 0.2 / (1 - 0.2)" in lines[0] and "agrees" in lines[0]


def test_a_censored_cbs_says_larger_multipliers_would_bound_it() -> None:
    lines = agreement(
        row(1024, 1024, math.inf, censored=True), PLAN, (497, 432, 568), None, (0.5, "progress")
    )
    assert "differs by a factor 0.49" in lines[0]
    assert "at least 1,024; larger multipliers would bound it" in lines[1]


def test_an_early_last_checkpoint_below_the_study_says_so() -> None:
    lines = agreement(
        row(150, 100, 200, examples=12816), PLAN, (497, 432, 568), None, (0.5, "progress")
    )
    assert "differs by a factor 3.3" in lines[0]
    assert "before the target (12,816 of 26,480 examples)" in lines[1]


def test_a_larger_cbs_at_the_target_points_at_the_trained_state() -> None:
    lines = agreement(row(2000, 1500, 3000), PLAN, (497, 432, 568), None, (0.5, "progress"))
    assert lines[1].startswith("Why the branches say more: they continue a trained state")
    assert agreement(row(math.nan, math.nan, math.nan), PLAN, None, None, (0.5, "progress"))


def test_a_study_b_noise_printed_open_is_compared_as_at_least() -> None:
    # The study's trials bound B_noise from below only (its interval's end is the search range).
    lines = agreement(row(450, 300, 700), PLAN, (900, 400, math.inf), None, (0.5, "progress"))
    assert "agrees with the study's B_noise 900 (at least 400)" in lines[0]
    lines = agreement(row(200, 150, 260), PLAN, (900, 400, math.inf), None, (0.5, "progress"))
    assert "from the study's B_noise 900 (at least 400)" in lines[0]
    # A study's answer with an open end reaches the branches as an infinite one.
    answer = Answer("B_noise", 900.0, 400.0, 512_000.0, open_high=True)
    assert answer_triple(answer) == (900.0, 400.0, math.inf)
    assert answer_triple(Answer("B_noise", 900.0, 400.0, 1000.0)) == (900.0, 400.0, 1000.0)
    assert answer_triple(None) is None
