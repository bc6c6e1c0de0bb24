from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from study.analysis import (
    COLUMNS,
    export_table,
    index_table,
    read_table,
    steps_to_result,
    strategy_table,
    target_holds,
    throughput_by_strategy,
    trial_steps_to_target,
    validate_table,
)
from study.analysis.measures import call_and_step_seconds
from study.config.hold import Hold
from study.config.target import Target

ACC_60 = Target.parse("val_accuracy>=0.6")


def _trial(batch_size=64, trial=0, lr=0.1, steps=(0, 10, 20), acc=(0.1, 0.5, 0.7), **kw):
    return {
        "batch_size": batch_size,
        "trial": trial,
        "learning_rate": lr,
        "steps": list(steps),
        "accuracy": list(acc),
        **kw,
    }


def test_steps_are_read_off_evaluation_steps_not_interpolated(make_table):
    df = make_table([_trial(seconds_per_step=0.5)])

    trials = trial_steps_to_target(df, ACC_60)
    result = steps_to_result(df, ACC_60)

    # 0.6 is crossed between steps 10 (0.5) and 20 (0.7): the answer is the evaluation at 20.
    assert trials["steps_to_target"].tolist() == [20.0]
    assert trials["examples_to_target"].tolist() == [20.0 * 64]
    assert trials["seconds_to_target"].tolist() == [10.0]
    assert result["steps_to_result"].tolist() == [20.0]
    assert result["examples_to_result"].tolist() == [1280.0]
    assert result["best_trial"].tolist() == [0]


def test_a_different_target_gives_different_numbers(make_table):
    df = make_table([_trial()])

    def steps(text: str) -> float:
        return steps_to_result(df, Target.parse(text))["steps_to_result"].item()

    assert steps("val_accuracy>=0.6") == 20
    assert steps("val_accuracy>=0.4") == 10
    assert steps("val_accuracy>0.7") == math.inf
    assert steps("val_loss<=1.5") == 10  # val_loss = 2.2 * (1 - acc): 1.98, 1.1, 0.66
    assert steps("val/classification_error<0.4") == 20


def test_never_reached_is_inf_and_rederives_reached_state(make_table):
    df = make_table([_trial(acc=(0.1, 0.2, 0.3), state="reached")])

    trials = trial_steps_to_target(df, ACC_60)
    result = steps_to_result(df, ACC_60).iloc[0]

    assert trials["steps_to_target"].item() == math.inf
    assert trials["seconds_to_target"].item() == math.inf
    assert not trials["reached"].item()
    assert trials["state"].item() == "not_reached"
    assert result["steps_to_result"] == math.inf
    assert result["examples_to_result"] == math.inf
    assert result["reached"] == 0 and result["trials"] == 1
    assert pd.isna(result["best_trial"])
    assert math.isnan(result["best_learning_rate"])
    assert not result["lr_on_edge"]


def test_nan_metrics_never_meet_the_target_and_diverged_is_counted(make_table):
    df = make_table(
        [
            _trial(trial=0, lr=1.0, acc=(0.1, np.nan, np.nan), state="diverged"),
            _trial(trial=1, lr=0.1, acc=(0.1, 0.3, 0.65)),
        ]
    )

    for target in (ACC_60, Target.parse("val_loss<=10")):
        trials = trial_steps_to_target(df, target).set_index("trial")
        assert trials.loc[0, "state"] == "diverged"
        assert trials.loc[0, "steps_to_target"] == (math.inf if target is ACC_60 else 0)
    result = steps_to_result(df, ACC_60).iloc[0]
    assert (result["trials"], result["reached"], result["diverged"]) == (2, 1, 1)
    assert result["best_trial"] == 1


def test_best_trial_is_min_steps_ties_go_to_smaller_lr_and_seconds_are_separate(make_table):
    df = make_table(
        [
            _trial(trial=0, lr=0.3, seconds_per_step=1.0),
            _trial(trial=1, lr=0.1, seconds_per_step=1.0),
            # Slower in steps (30) but far faster per step: the wall-clock minimum.
            _trial(
                trial=2,
                lr=0.01,
                steps=(0, 10, 20, 30),
                acc=(0, 0.2, 0.4, 0.9),
                seconds_per_step=0.1,
            ),
        ]
    )

    result = steps_to_result(df, ACC_60).iloc[0]

    assert result["steps_to_result"] == 20
    assert result["best_trial"] == 1
    assert result["best_learning_rate"] == 0.1
    assert result["seconds_to_result"] == pytest.approx(3.0)
    assert (result["lr_min"], result["lr_max"]) == (0.01, 0.3)


@pytest.mark.parametrize(
    ("lrs", "best", "edge"),
    [
        ((0.01, 0.1, 1.0), 1.0, "high"),
        ((0.01, 0.1, 1.0), 0.01, "low"),
        ((0.01, 0.1, 1.0), 0.1, ""),
        ((0.01, 1.0), 1.0, ""),  # two rates cannot tell an edge from a range
        ((0.01, 0.010000001, 1.0), 1.0, ""),  # within 1.0001: only two distinct rates
    ],
)
def test_lr_edge_flag(make_table, lrs, best, edge):
    df = make_table(
        [
            _trial(trial=i, lr=lr, acc=(0.1, 0.7, 0.8) if lr == best else (0.1, 0.5, 0.7))
            for i, lr in enumerate(lrs)
        ]
    )

    result = steps_to_result(df, ACC_60).iloc[0]

    assert result["best_learning_rate"] == best
    assert result["lr_edge"] == edge
    assert result["lr_on_edge"] == bool(edge)


def test_per_batch_size_and_per_strategy(make_table):
    df = make_table(
        [
            _trial(batch_size=32, trial=0, acc=(0.1, 0.7, 0.8)),
            _trial(batch_size=64, trial=1, strategy="default"),
            _trial(batch_size=64, trial=2, strategy="mirrored:2", replicas=2, acc=(0.7, 0.8, 0.9)),
        ]
    )

    pooled = steps_to_result(df, ACC_60)
    split = steps_to_result(df, ACC_60, by=("batch_size", "strategy"))

    assert pooled[["batch_size", "steps_to_result"]].values.tolist() == [[32, 10], [64, 0]]
    assert split[["batch_size", "strategy", "steps_to_result"]].values.tolist() == [
        [32, "default", 10],
        [64, "default", 20],
        [64, "mirrored:2", 0],
    ]


def test_indexed_and_flat_tables_agree(make_scaling_table):
    df = make_scaling_table(batch_sizes=(8, 64, 512), learning_rates=(0.01, 0.1))

    indexed = index_table(df)

    assert list(indexed.index.names) == ["batch_size", "trial", "step"]
    assert indexed.index.is_monotonic_increasing
    pd.testing.assert_frame_equal(steps_to_result(indexed, ACC_60), steps_to_result(df, ACC_60))


def test_validate_table_names_missing_columns(make_table):
    df = make_table([_trial()])
    validate_table(df)
    validate_table(index_table(df))

    with pytest.raises(ValueError, match=r"missing columns 'step', 'val_nope'"):
        validate_table(df.drop(columns=["step"]), COLUMNS, metrics=["val_nope"])
    with pytest.raises(ValueError, match="val_auc"):
        trial_steps_to_target(df, Target.parse("val_auc>=0.9"))


def test_throughput_and_time_to_result_by_strategy(make_table):
    df = make_table(
        [
            _trial(trial=0, strategy="default", replicas=1, seconds_per_step=0.1),
            _trial(trial=1, strategy="default", replicas=1, seconds_per_step=0.3),
            _trial(
                trial=2, strategy="mirrored:2", replicas=2, seconds_per_step=0.05, acc=(0, 0.1, 0.2)
            ),
        ]
    )

    out = throughput_by_strategy(df, ACC_60).set_index("strategy")

    # Both trials' intervals have one length: their pooled cost, 0.2 s/step (5 steps/s); steps
    # to result pooled over strategies (20 steps).
    assert out.loc["default", "seconds_per_step"] == pytest.approx(0.2)
    assert out.loc["default", "steps_per_second"] == pytest.approx(5.0)
    assert out.loc["default", "examples_per_second"] == pytest.approx(64 * 5.0)
    assert out.loc["default", "timed_trials"] == 2
    assert out.loc["mirrored:2", "seconds_per_step"] == pytest.approx(0.05)
    assert out.loc["mirrored:2", "time_to_result"] == pytest.approx(20 * 0.05)
    assert out.loc["mirrored:2", "measured_seconds_to_result"] == math.inf
    assert out.loc["default", "measured_seconds_to_result"] == pytest.approx(2.0)
    assert "time_to_result" not in throughput_by_strategy(df).columns


def test_strategy_table_reports_fastest_trial_and_its_metrics(make_table):
    df = make_table(
        [
            _trial(trial=0, seconds_per_step=1.0, acc=(0.1, 0.7, 0.9)),
            _trial(trial=1, lr=0.3, seconds_per_step=0.1, acc=(0.1, 0.5, 0.7)),
            _trial(trial=2, strategy="mirrored:2", replicas=2, acc=(0.1, 0.2, 0.4)),
            _trial(trial=3, strategy="mirrored:2", replicas=2, acc=(0.1, 0.2, 0.5)),
        ]
    )

    table = strategy_table(df, ACC_60).set_index("strategy")

    assert table.loc["default", "seconds_to_result"] == pytest.approx(2.0)
    assert table.loc["default", "best_trial"] == 1
    assert table.loc["default", "learning_rate"] == 0.3
    assert table.loc["default", "val_accuracy"] == pytest.approx(0.7)
    assert table.loc["default", "val_loss"] == pytest.approx(2.2 * 0.3)
    # Nobody reached the target on mirrored:2: the best final accuracy is reported.
    assert table.loc["mirrored:2", "seconds_to_result"] == math.inf
    assert table.loc["mirrored:2", "best_trial"] == 3


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_round_trip(make_table, tmp_path, suffix):
    df = make_table([_trial(), _trial(trial=1, acc=(0.2, 0.4, np.nan))])

    path = export_table(index_table(df), tmp_path / f"runs{suffix}")
    back = read_table(path)

    assert path.exists()
    assert set(df.columns) <= set(back.columns)
    pd.testing.assert_frame_equal(
        steps_to_result(back, ACC_60), steps_to_result(df, ACC_60), check_dtype=False
    )


def test_export_rejects_unknown_suffix(make_table, tmp_path):
    with pytest.raises(ValueError, match=r"\.csv, \.parquet"):
        export_table(make_table([_trial()]), tmp_path / "runs.xlsx")


@pytest.mark.parametrize("text", ["val_loss<=0.5", "val_loss<0.5", "val_accuracy>=0.5", "x>0.5"])
def test_target_holds_matches_target(text):
    target = Target.parse(text)
    values = [0.4, 0.5, 0.6, math.nan, math.inf]

    assert target_holds(np.array(values), target).tolist() == [target.holds(v) for v in values]


def test_call_and_step_seconds_separates_the_fixed_cost_of_a_call() -> None:
    steps = np.array([1, 2, 4, 8, 16])
    assert call_and_step_seconds(steps, 0.5 + 1.0 * steps) == pytest.approx((0.5, 1.0))
    # one interval length, or too few intervals: no call cost, the pooled cost per step
    assert call_and_step_seconds(np.array([5, 5, 5]), np.array([1.0, 2.0, 3.0])) == (0.0, 0.4)
    assert call_and_step_seconds(np.array([1, 2]), np.array([1.0, 2.0])) == (0.0, 1.0)


def test_short_trials_report_the_speed_of_a_long_run(make_table) -> None:
    """A geometric cadence gives intervals of many lengths; a 0.4 ms cost per call must not
    inflate the 0.1 ms cost per step."""
    steps = (0, 1, 2, 3, 4, 5, 7, 9, 12, 15, 19, 24, 30)  # geometric:1.25
    df = make_table([_trial(trial=0, steps=steps, acc=[0.1] * len(steps))])
    steps = df["step"].to_numpy(dtype=float)
    calls = np.arange(len(steps))  # one call per evaluation interval
    df["train_seconds"] = 1e-4 * steps + 4e-4 * calls
    out = throughput_by_strategy(df).iloc[0]
    assert out["seconds_per_step"] == pytest.approx(1e-4)
    assert out["call_seconds"] == pytest.approx(4e-4)


def test_the_hold_rule_counts_the_crossing_that_held_and_the_ones_that_fell_back(make_table):
    """At every step: 0.7 at 10-12, back under at 13, then above from 14 on. With a hold of 5
    steps the crossing at 10 does not count; the one at 14 does (it holds through 19)."""
    steps = list(range(25))
    acc = [0.1] * 10 + [0.7] * 3 + [0.5] + [0.7] * 11
    short = [0.1] * 10 + [0.7] * 3  # a crossing the curve ends inside of
    df = make_table(
        [
            _trial(trial=0, steps=steps, acc=acc),
            _trial(trial=1, steps=range(13), acc=short, state="not_reached"),
            _trial(trial=2, steps=(0, 10, 20, 30), acc=(0.1, 0.5, 0.7, 0.8)),
        ]
    )
    held = replace(ACC_60, hold=Hold(0.0, 5))
    trials = trial_steps_to_target(df, held).set_index("trial")
    assert trials["steps_to_target"].tolist() == [14.0, math.inf, 20.0]
    assert trials["examples_to_target"].tolist() == [14.0 * 64, math.inf, 20.0 * 64]
    assert trials["fell_back"].tolist() == [1, 0, 0]
    assert trials["reached"].tolist() == [True, False, True]
    first = trial_steps_to_target(df, ACC_60).set_index("trial")  # Hold.OFF: the first crossing
    assert first["steps_to_target"].tolist() == [10.0, 10.0, 20.0]
    assert first["fell_back"].tolist() == [0, 0, 0]
