"""Tests for study.analysis.pilot_text: a pilot and its suggestion as the lines printed."""

from __future__ import annotations

import math

from study.analysis.pilot import Pilot, suggest
from study.analysis.pilot_text import format_suggestion, format_table, interval_text


def pilot(points: int = 3, at_step: int | None = None) -> Pilot:
    curve = tuple((10 * (i + 1), 100.0 + i, 80.0, 130.0) for i in range(points))
    return Pilot(
        batch_size=8,
        strategy="default",
        learning_rate=0.01,
        seed=0,
        steps_run=10 * points,
        target="val_accuracy>=0.9",
        at_step=at_step if at_step is not None else 10 * points,
        b_simple=100.0,
        b_simple_low=80.0,
        b_simple_high=130.0,
        curve=curve,
    )


def test_interval_text() -> None:
    assert interval_text(26.8, 90.1) == "26.8 to 90.1"
    assert interval_text(26.8, math.inf) == "26.8 to inf"
    assert interval_text(math.nan, math.nan) == "-"


def test_table_has_one_line_per_evaluation() -> None:
    lines = format_table(pilot(3)).splitlines()
    assert lines[0].split() == ["step", "B_simple", "95%", "interval"]
    assert [line.split()[0] for line in lines[1:]] == ["10", "20", "30"]
    assert lines[1].split()[1:] == ["100", "80", "to", "130"]


def test_long_table_keeps_the_ends_and_the_step_read() -> None:
    lines = format_table(pilot(100, at_step=370), rows=5).splitlines()[1:]
    steps = [int(line.split()[0]) for line in lines]
    assert steps[0] == 10 and steps[-1] == 1000 and 370 in steps
    assert len(steps) == 6  # five spread evenly, and the step the result is read at


def test_suggestion_lists_each_batch_size_and_the_study_range() -> None:
    text = format_suggestion(suggest(pilot(), ["default"], 8000), pilot())
    lines = text.splitlines()
    assert lines[0].startswith("suggested batch sizes: 8, 16, 32, 64, 128, 256, 512, 1024, 2048")
    assert "  " + "2048".rjust(8) + ": 0.16 to 2.56" in lines
    assert lines[-1] == "study learning-rate range: 0.01 to 2.56 (log scale)"
