"""The pilot's suggestion: a geometric batch-size grid around B_simple, learning-rate ranges
from the square-root and linear rules (the stored form of a pilot: tests/ledger/test_notes.py)."""

from __future__ import annotations

import itertools
import math

import pytest

from study.analysis.pilot import (
    Pilot,
    learning_rate_ranges,
    pilot_curve,
    study_range,
    suggest,
    suggest_batch_sizes,
)


def test_grid_spans_sixteen_times_either_side() -> None:
    sizes = suggest_batch_sizes(100, largest=8000)
    assert sizes == (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
    assert sizes[0] <= 100 / 16 * 2 and sizes[-1] >= 100 * 16 / 2


@pytest.mark.parametrize(
    ("b_simple", "largest", "unit", "expected"),
    [
        (2000, 8000, 1, (128, 256, 512, 1024, 2048, 4096)),  # clipped above: no room to grow
        (2, 8000, 1, (1, 2, 4, 8, 16, 32)),  # clipped below: grows upwards to 6 sizes
        (100, 100, 1, (2, 4, 8, 16, 32, 64)),  # a tiny training set: grows downwards
        (100, 8000, 3, (6, 12, 24, 48, 96, 192, 384, 768, 1536)),  # multiples of 3 replicas
        (5, 40, 1, (1, 2, 4, 8, 16, 32)),  # exactly six fit
        (5, 20, 1, (1, 2, 4, 8, 16)),  # fewer than six fit: all that do
    ],
)
def test_grid_is_clipped_and_grows_to_six_sizes(
    b_simple: float, largest: int, unit: int, expected: tuple[int, ...]
) -> None:
    sizes = suggest_batch_sizes(b_simple, largest=largest, unit=unit)
    assert sizes == expected
    assert all(s % unit == 0 and s <= largest for s in sizes)
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))


@pytest.mark.parametrize("bad", [math.nan, 0.0, -3.0, math.inf])
def test_grid_needs_a_positive_estimate(bad: float) -> None:
    with pytest.raises(ValueError, match="B_simple must be a positive number"):
        suggest_batch_sizes(bad, largest=1000)


def test_grid_needs_room_for_one_batch() -> None:
    with pytest.raises(ValueError, match="multiple of 8 fits in 4 examples"):
        suggest_batch_sizes(10, largest=4, unit=8)


def test_learning_rates_scale_between_square_root_and_linear() -> None:
    ranges = learning_rate_ranges([2, 8, 32, 128], pilot_batch=8, pilot_rate=0.01)
    assert ranges[8] == (0.01, 0.01)
    assert ranges[32] == (0.02, 0.04)  # 4^0.5 and 4^1
    assert ranges[128] == (0.04, 0.16)
    assert ranges[2] == (0.0025, 0.005)  # below the pilot the linear rule is the lower one
    assert study_range(ranges, 0.01) == (0.0025, 0.16)
    assert study_range({8: (0.01, 0.01)}, 0.01) == (0.00333, 0.03)


def test_curve_keeps_measured_steps_in_order() -> None:
    rows = [
        {"step": 0, "noise": {}},
        {"step": 20, "noise": {"b_simple": 12.0, "b_simple_low": 8.0, "b_simple_high": 20.0}},
        {"step": 10, "noise": {"b_simple": 10.0}},
    ]
    curve = pilot_curve(rows)
    assert [p[0] for p in curve] == [10, 20]
    assert curve[1] == (20, 12.0, 8.0, 20.0) and math.isnan(curve[0][2])


def test_suggest_puts_the_grid_and_ranges_together() -> None:
    pilot = Pilot(
        batch_size=8,
        strategy="default",
        learning_rate=0.01,
        seed=0,
        steps_run=100,
        target="val_accuracy>=0.9",
        at_step=100,
        b_simple=100.0,
    )
    suggestion = suggest(pilot, ["default", "mirrored:2"], 8000, unit=2)
    assert suggestion["batch_sizes"] == [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert suggestion["learning_rate_by_batch_size"]["8"] == [0.01, 0.01]
    assert suggestion["learning_rate_by_batch_size"]["32"] == [0.02, 0.04]
    assert suggestion["learning_rate"] == [0.01, 2.56]
    assert suggestion["strategies"] == ["default", "mirrored:2"]
    assert (suggestion["alphas"], suggestion["train_examples"]) == ([0.5, 1.0], 8000)
    odd = suggest(pilot, ["mirrored:3"], 8000, unit=3)
    assert all(size % 3 == 0 for size in odd["batch_sizes"])
