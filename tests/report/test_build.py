"""build_report: the numbers of a scaling report and its notes on thin data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.config.target import Target
from study.report import ScalingReport, answer, build_report, summary_lines

TARGET = Target.parse("val_accuracy>=0.6")
S_MIN, B_NOISE = 100.0, 128.0
BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)


def build(df: pd.DataFrame, target: Target = TARGET, **kwargs) -> ScalingReport:
    options = {"study": "synthetic", "accelerators": None, "n_boot": 200, **kwargs}
    return build_report(df, target, **options)


@pytest.fixture(scope="module")
def table(make_table) -> pd.DataFrame:
    return make_table(s_min=S_MIN, b_noise=B_NOISE, batch_sizes=BATCH_SIZES)


@pytest.fixture(scope="module")
def report(table: pd.DataFrame) -> ScalingReport:
    return build(table)


def test_steps_are_pooled_over_strategies_and_kept_per_stratum(report, table) -> None:
    assert list(report.steps["batch_size"]) == list(BATCH_SIZES)
    by_stratum = report.steps_by_strategy.set_index(["batch_size", "strategy"])["steps_to_result"]
    pooled = report.steps.set_index("batch_size")["steps_to_result"]
    for b in BATCH_SIZES:
        assert pooled[b] == min(by_stratum[(b, "default")], by_stratum[(b, "mirrored:2")])
    # One row per trial; every trial reached the target.
    assert len(report.trials) == table["trial"].nunique()
    assert report.trials["reached"].all()


def test_noise_scale_fit_recovers_the_truth_with_an_interval(report) -> None:
    fit = report.noise_scale
    assert fit.ok
    assert fit.b_noise == pytest.approx(B_NOISE, rel=0.25)
    assert fit.s_min == pytest.approx(S_MIN, rel=0.25)
    low, high = fit.b_noise_ci
    assert low <= fit.b_noise <= high
    assert fit.n_boot == 200
    # The fit's prediction sits next to the measured steps in the per-batch table.
    ratio = report.steps["steps_to_result"] / report.steps["fit_steps"]
    assert np.all(np.abs(np.log(ratio)) < 0.3)


def test_regimes_lr_law_and_recommendation(report) -> None:
    assert report.regimes.ok
    assert report.regimes.perfect_end <= B_NOISE
    assert set(report.steps["regime"]) <= {"perfect", "diminishing", "maximal"}
    lr = report.lr_fit
    assert lr.ok and lr.alpha == pytest.approx(0.5, abs=0.05)
    assert lr.sqrt_in_ci and not lr.linear_in_ci
    rec = report.recommendation
    # Default accelerators: the largest replica count (2), at least 8.
    assert report.accelerators == 8 and rec.accelerators == 8
    assert rec.ok and rec.batch_size % 8 == 0
    assert rec.step_speedup > 1 and rec.time_speedup > 0


def test_throughput_and_strategy_tables(report) -> None:
    speed = report.throughput.set_index(["strategy", "batch_size"])["seconds_per_step"]
    for b in BATCH_SIZES:
        assert speed[("mirrored:2", b)] < speed[("default", b)]
    strategies = report.strategies
    assert len(strategies) == 2 * len(BATCH_SIZES)
    assert {"val_accuracy", "val_loss", "seconds_to_result", "seconds_per_step"} <= set(
        strategies.columns
    )
    assert np.isfinite(strategies["seconds_to_result"]).all()


def test_clean_data_has_no_thin_data_notes(report) -> None:
    text = " ".join(report.notes)
    for phrase in ("never reached", "Only", "still running", "edge", "never measured"):
        assert phrase not in text
    assert "B_noise = " in answer(report)
    lines = summary_lines(report)
    assert 3 <= len(lines) <= 5


def test_accelerators_are_taken_as_given(table) -> None:
    report = build(table, accelerators=4, n_boot=0)
    assert report.accelerators == 4 and report.recommendation.accelerators == 4
    assert report.noise_scale.b_noise_ci is None


def test_another_target_gives_other_steps(report, table) -> None:
    harder = build(table, Target.parse("val_accuracy>=0.7"), n_boot=0)
    assert (harder.steps["steps_to_result"] > report.steps["steps_to_result"]).all()


# ------------------------------------------------------------------------------- thin data


def test_two_batch_sizes_give_no_fit_and_say_why(make_table) -> None:
    report = build(make_table(batch_sizes=(32, 64)))
    assert not report.noise_scale.ok and not report.lr_fit.ok and not report.recommendation.ok
    (note,) = [n for n in report.notes if n.startswith("Only 2 batch size(s) (32 and 64)")]
    assert "needs at least 3" in note
    assert "no noise-scale fit" in answer(report).lower()


def test_a_batch_size_that_never_reached_is_named(make_table) -> None:
    df = make_table()
    df.loc[df["batch_size"] == 1024, "val_accuracy"] = 0.2
    report = build(df)
    assert math.isinf(report.steps.set_index("batch_size").loc[1024, "steps_to_result"])
    assert report.steps.set_index("batch_size").loc[1024, "regime"] == "not reached"
    assert any(n.startswith("Batch size 1024 (6 trials) never reached") for n in report.notes)
    assert report.noise_scale.ok and 1024 in report.noise_scale.excluded
    # Bootstrap replicates leave the unreached batch size out too (inf steps are not data).
    low, high = report.noise_scale.b_noise_ci
    assert B_NOISE / 3 < low < high < 3 * B_NOISE


def test_a_running_study_is_flagged(make_table) -> None:
    df = make_table()
    df.loc[df["trial"] == 0, "state"] = "running"
    report = build(df, state="running")
    assert any("still running (1 trial(s) in progress)" in n for n in report.notes)
    assert any("incomplete" in n for n in build(make_table(), state="incomplete").notes)


def test_best_learning_rate_on_the_range_edge_is_named(make_table) -> None:
    # Only rates at and below the best: the best sits on the high edge everywhere.
    report = build(make_table(lr_factors=(1 / 9, 1 / 3, 1.0)), n_boot=0)
    (note,) = [n for n in report.notes if "high edge" in n]
    assert "batch sizes 8, 16, 32, 64, 128, 256, 512 and 1024" in note
    assert "widen the learning-rate range upwards" in note


def test_a_missing_target_metric_is_said_not_raised(table) -> None:
    report = build(table, Target.parse("val/f1>=0.5"))
    assert report.trials.empty and report.steps.empty
    assert not report.noise_scale.ok and not report.recommendation.ok
    (note,) = [n for n in report.notes if "never measured" in n]
    assert "val/f1" in note and "val_accuracy" in note


@pytest.mark.parametrize(
    "rows",
    [slice(0, 0), slice(0, 1)],
    ids=["empty", "one-evaluation"],
)
def test_tiny_tables_do_not_crash(table, rows) -> None:
    report = build(table.iloc[rows])
    assert not report.noise_scale.ok
    assert report.notes


def test_nothing_reached(table) -> None:
    report = build(table, Target.parse("val_accuracy>=0.99"))
    assert not np.isfinite(report.steps["steps_to_result"]).any()
    assert "No batch size reached the target" in answer(report)
    assert any("never reached" in n for n in report.notes)


def test_bad_arguments_raise(table) -> None:
    with pytest.raises(ValueError, match="accelerators"):
        build(table, accelerators=0)
    with pytest.raises(ValueError, match="n_boot"):
        build(table, n_boot=-1)


def test_an_unbounded_noise_scale_is_said(make_table) -> None:
    # Perfect scaling over the whole measured range: B_noise is not bounded from above.
    report = build(make_table(b_noise=1e6, batch_sizes=(8, 16, 32, 64)), n_boot=50)
    assert report.noise_scale.ok
    assert any("do not bound B_noise from above" in n for n in report.notes)
