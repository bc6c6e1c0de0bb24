"""The batch schedule against the best fixed batch size: which fixed batch size is the best,
when the schedule wins, and a verdict that says plainly when it does not."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from study.ext.schedules.compare import (
    FixedBatch,
    ScheduleRun,
    Spread,
    best_fixed,
    compare_schedule,
)


def fixed_table(steps: dict[int, float], strategy: str = "default") -> pd.DataFrame:
    """A `summarize_trials`-shaped table: steps per batch size, examples = batch x steps,
    0.01 s a step."""
    rows = [
        {
            "batch_size": b,
            "strategy": strategy,
            "steps_to_result": s,
            "steps_low": s,
            "steps_high": s,
            "seeds": 1,
            "examples_to_result": b * s,
            "seconds_to_result": 0.01 * s,
        }
        for b, s in steps.items()
    ]
    return pd.DataFrame(rows)


#: Perfect scaling to 128 (25,600 examples), then diminishing returns.
CURVE = {32: 800, 64: 400, 128: 200, 256: 130, 512: 100}


def runs(*steps_examples: tuple[int | None, int | None]) -> list[ScheduleRun]:
    return [
        ScheduleRun(seed, s, e, None if s is None else 0.01 * s)
        for seed, (s, e) in enumerate(steps_examples)
    ]


def test_the_best_fixed_batch_is_the_fastest_within_the_example_tolerance() -> None:
    fixed = [FixedBatch(b, s, s, s, 1, b * s, 0.0) for b, s in CURVE.items()]
    best = best_fixed(fixed)
    assert best is not None and best.batch_size == 128  # 256 spends 33,280 > 1.1 x 25,600
    assert best_fixed(fixed, tolerance=1.4).batch_size == 256  # type: ignore[union-attr]
    assert best_fixed([FixedBatch(8, math.inf, math.inf, math.inf, 1, math.inf, 0.0)]) is None


def test_the_schedule_wins_with_fewer_steps_at_no_more_than_the_tolerance() -> None:
    c = compare_schedule(fixed_table(CURVE), runs((160, 26_000), (170, 27_000), (150, 25_000)), "s")
    assert c.ok and c.best is not None and c.best.batch_size == 128
    assert c.steps == Spread(160, 150, 170, 3)
    assert c.ratios["steps"] == pytest.approx(0.8)
    assert c.ratios["examples"] == pytest.approx(26_000 / 25_600)
    assert c.wins
    assert c.verdict.startswith("the schedule wins: 0.80x the steps of the best fixed batch size")


def test_it_says_plainly_when_the_schedule_does_not_win() -> None:
    more_steps = compare_schedule(fixed_table(CURVE), runs((220, 20_000), (230, 21_000)), "s")
    assert not more_steps.wins
    assert more_steps.verdict == (
        "the schedule does not win: it takes 1.12x the steps of the best fixed batch size (128), "
        "median over 2 seeds"
    )
    wasteful = compare_schedule(fixed_table(CURVE), runs((150, 40_000), (150, 40_000)), "s")
    assert not wasteful.wins and "spends 1.56x its examples (more than 1.1x)" in wasteful.verdict
    missed = compare_schedule(fixed_table(CURVE), runs((150, 25_000), (None, None)), "s")
    assert not missed.wins
    assert missed.verdict == ("the schedule does not win: seed(s) 1 of 2 never reached the target")
    assert missed.steps is not None and missed.steps.high == math.inf
    assert missed.to_dict()["steps"]["high"] is None  # JSON-ready


def test_nothing_to_compare() -> None:
    assert compare_schedule(fixed_table(CURVE), [], "s").reason == "no schedule trial has finished"
    other = compare_schedule(fixed_table(CURVE, "mirrored:2"), runs((1, 1)), "s")
    assert not other.ok and other.reason == "no fixed batch size on default reached the target"
