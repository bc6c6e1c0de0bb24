"""The model of every trial refitted at several levels of the target's metric."""

from __future__ import annotations

import pandas as pd
import pytest

from study.analysis.target_levels import LEVELS, START_SHARE, level_grid, sweep_levels
from study.config.hold import Hold
from study.config.target import Target

from .conftest import scaling_table

TARGET = Target.parse("val_accuracy>=0.6")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """S(B) = 200 (1 + 256 / B) to 0.6; accuracy rises linearly, so every level's steps are a
    fixed share of the target's: B_noise is 256 at every level."""
    return scaling_table(batch_sizes=(8, 32, 128, 512, 2048), learning_rates=(0.01, 0.1, 1.0))


def test_the_grid_runs_from_the_level_nearly_every_trial_reached_to_the_target(table) -> None:
    grid = level_grid(table, TARGET)
    assert len(grid) == LEVELS and grid[-1] == 0.6
    assert list(grid) == sorted(grid)
    start = table.sort_values("step").groupby("trial")["val_accuracy"].first().median()
    assert grid[0] >= start + START_SHARE * (0.6 - start) - 1e-3
    assert level_grid(table, TARGET, 3)[-1] == 0.6 and len(level_grid(table, TARGET, 3)) == 3


def test_the_grid_of_a_falling_metric_falls_to_its_target(table) -> None:
    grid = level_grid(table, Target.parse("val_loss<=0.88"))
    assert grid[-1] == 0.88 and list(grid) == sorted(grid, reverse=True)


def test_the_grid_is_empty_without_the_metric_and_needs_two_levels(table) -> None:
    assert level_grid(table, Target.parse("val_auc>=0.9")) == ()
    with pytest.raises(ValueError, match="n must be >= 2"):
        level_grid(table, TARGET, 1)


def test_every_level_answers_with_the_targets_hold_rule(table) -> None:
    held = Target("val_accuracy", ">=", 0.6, Hold(fraction=0.05, min_steps=5))
    sweep = sweep_levels(table, held, [0.6, 0.4], accelerators=8)
    assert [lv.threshold for lv in sweep.levels] == [0.4, 0.6]  # easiest first
    assert all(lv.target.hold == held.hold and lv.ok for lv in sweep.levels)
    easy, hard = (lv.answers.b_noise for lv in sweep.levels)
    assert easy.covers(256) and hard.covers(256)
    assert sweep.range_text() == "0.4-0.6"
    frame = sweep.frame()
    assert list(frame["threshold"]) == [0.4, 0.6]
    assert frame["axis"].tolist() == pytest.approx([0.6, 0.4])
    assert {"b_noise_low", "critical_batch_high", "alpha", "recommended_batch"} <= set(frame)
    assert (frame["trials_reached"] > 0).all()
    one = sweep.answers_frame(0.6)
    assert one.set_index("answer").loc["b_noise", "estimate"] == hard.estimate
    with pytest.raises(KeyError, match=r"no level at 0\.5"):
        sweep.answers_frame(0.5)


def test_a_level_no_trial_reached_has_no_answer(table) -> None:
    sweep = sweep_levels(table, TARGET, [0.95])
    assert not sweep.levels[0].ok and sweep.levels[0].reached == 0
    assert sweep.answered() == () and sweep.range_text() == ""
    with pytest.raises(ValueError, match="finite thresholds"):
        sweep_levels(table, TARGET, [])
