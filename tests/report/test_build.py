"""build_report: the numbers of a scaling report, computed once from the measurement table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from study.config.target import Target
from study.report import measured_metrics

S_MIN, B_NOISE = 100.0, 128.0  # the truth of the `table` fixture
BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)


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
    assert fit.method == "model of every trial"
    assert fit.b_noise == report.answers.b_noise.estimate
    assert fit.b_noise_ci == (report.answers.b_noise.low, report.answers.b_noise.high)
    # The best trials alone are the cross-check, with profile-likelihood intervals.
    assert report.cross_check.noise_scale.method == "profile likelihood"
    # The model's prediction sits next to the measured steps in the per-batch table.
    ratio = report.steps["steps_to_result"] / report.steps["fit_steps"]
    assert np.all(np.abs(np.log(ratio)) < 0.3)


def test_regimes_lr_law_and_recommendation(report) -> None:
    answers = report.answers
    assert report.regimes.ok
    assert report.regimes.perfect_end == answers.perfect_end.estimate
    assert report.regimes.perfect_end <= B_NOISE
    assert set(report.steps["regime"]) <= {"perfect", "diminishing", "maximal"}
    assert answers.alpha.estimate == pytest.approx(0.5, abs=0.1)
    assert answers.alpha.covers(0.5) and not answers.alpha.covers(1.0)
    lr = report.cross_check.lr_fit
    assert lr.ok and lr.alpha == pytest.approx(0.5, abs=0.05)
    assert lr.sqrt_in_ci and not lr.linear_in_ci
    rec = report.recommendation
    assert rec.batch_size == answers.recommended_batch.estimate
    assert rec.learning_rate == answers.recommended_lr.estimate
    assert rec.step_speedup == answers.step_speedup.estimate
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


def test_accelerators_are_taken_as_given(make_report, table) -> None:
    report = make_report(table, accelerators=4)
    assert report.accelerators == 4 and report.recommendation.accelerators == 4
    assert report.answers.accelerators == 4


def test_another_target_gives_other_steps(make_report, report, table) -> None:
    harder = make_report(table, Target.parse("val_accuracy>=0.7"))
    assert (harder.steps["steps_to_result"] > report.steps["steps_to_result"]).all()


def test_the_confidence_reaches_every_fit(make_report, report, table) -> None:
    narrow = make_report(table, confidence=0.9)

    assert narrow.confidence == 0.9 and report.confidence == 0.95
    assert narrow.noise_scale.confidence == 0.9 and narrow.answers.confidence == 0.9
    assert narrow.cross_check.lr_fit.confidence == 0.9
    assert narrow.noise_scale.b_noise == report.noise_scale.b_noise
    wide_ci, narrow_ci = report.noise_scale.b_noise_ci, narrow.noise_scale.b_noise_ci
    assert wide_ci[0] <= narrow_ci[0] < narrow_ci[1] <= wide_ci[1]
    wide_alpha, narrow_alpha = report.answers.alpha, narrow.answers.alpha
    assert narrow_alpha.high - narrow_alpha.low < wide_alpha.high - wide_alpha.low
    rec_wide, rec_narrow = report.recommendation, narrow.recommendation
    assert rec_narrow.step_speedup == rec_wide.step_speedup
    assert rec_wide.step_speedup_ci[0] <= rec_narrow.step_speedup_ci[0]


def test_best_rates_on_the_edge_are_left_out_of_the_lr_law(make_table, make_report) -> None:
    inner = make_table(batch_sizes=(8, 16, 32, 64), ratio=1.15)
    edge = make_table(batch_sizes=(128,), lr_factors=(1 / 9, 1 / 3, 1.0), ratio=1.15, seed=1)
    edge["trial"] += inner["trial"].max() + 1

    report = make_report(pd.concat([inner, edge], ignore_index=True))

    assert report.steps.set_index("batch_size").loc[128, "lr_edge"] == "high"
    lr = report.cross_check.lr_fit
    assert lr.ok and lr.batch_sizes == (8, 16, 32, 64)


@pytest.mark.parametrize("rows", [slice(0, 0), slice(0, 1)], ids=["empty", "one-evaluation"])
def test_tiny_tables_do_not_crash(make_report, table, rows) -> None:
    report = make_report(table.iloc[rows])
    assert not report.noise_scale.ok
    assert report.notes


def test_bad_arguments_raise(make_report, table) -> None:
    with pytest.raises(ValueError, match="accelerators"):
        make_report(table, accelerators=0)
    with pytest.raises(ValueError, match="overhead must be > 0"):
        make_report(table, overhead=0.0)
    with pytest.raises(ValueError, match=r"confidence must be between 0 and 1.*\(got 95\)"):
        make_report(table, confidence=95)


def test_measured_metrics_are_the_validation_metrics(table) -> None:
    ledger = table.assign(stratum_trial=0)  # `ledger_table` adds it; it is no metric

    assert measured_metrics(ledger) == ["val_accuracy", "val_loss"]
    assert measured_metrics(ledger.iloc[:0]) == []
