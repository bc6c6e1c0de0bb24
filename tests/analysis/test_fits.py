from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis import (
    fit_lr_power_law,
    fit_noise_scale,
    fit_noise_scale_from_trials,
    recommend,
    scaling_regimes,
    steps_to_result,
    throughput_by_strategy,
    trial_steps_to_target,
)
from study.config.target import Target

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


def _steps_df(batch_sizes, steps, best_lr=None, **extra) -> pd.DataFrame:
    df = pd.DataFrame({"batch_size": batch_sizes, "steps_to_result": np.asarray(steps, float)})
    if best_lr is not None:
        df["best_learning_rate"] = best_lr
    for name, values in extra.items():
        df[name] = values
    return df


def test_noise_scale_recovered_from_noisy_trials_with_bootstrap_coverage(make_trial_steps):
    # Known S_min=200, B_noise=256; 5 trials per batch size, each with 10% lognormal noise.
    trials = make_trial_steps(s_min=200, b_noise=256, trials_per_batch=5, noise=0.1, seed=0)

    fit = fit_noise_scale_from_trials(trials, n_boot=200, seed=0)

    assert fit.ok, fit.reason
    assert fit.b_noise == pytest.approx(256, rel=0.15)
    low, high = fit.b_noise_ci
    assert low <= 256 <= high
    assert low < fit.b_noise < high
    assert fit.e_min == pytest.approx(fit.s_min * fit.b_noise)
    assert fit.s_min_ci[0] < fit.s_min_ci[1] and fit.e_min_ci[0] < fit.e_min_ci[1]
    assert fit.n_boot == 200 and len(fit.boot_b_noise) == 200
    band_low, band_high = fit.steps_band([8, 256, 4096])
    assert np.all(band_low < band_high)


def test_noise_scale_exact_on_noiseless_curve():
    steps = 200 * (1 + 256 / POWERS)

    fit = fit_noise_scale(POWERS, steps)

    assert fit.ok
    assert fit.s_min == pytest.approx(200, rel=1e-6)
    assert fit.b_noise == pytest.approx(256, rel=1e-6)
    assert fit.e_min == pytest.approx(200 * 256, rel=1e-6)
    assert fit.predict_steps(256) == pytest.approx(400, rel=1e-6)
    assert fit.predict_examples(256) == pytest.approx(2 * fit.e_min, rel=1e-6)
    assert fit.s_min_ci is None and fit.steps_band(256) is None


def test_residual_bootstrap_interval_brackets_estimate():
    rng = np.random.default_rng(1)
    steps = 200 * (1 + 256 / POWERS) * rng.lognormal(0, 0.05, POWERS.size)

    fit = fit_noise_scale(POWERS, steps, n_boot=200, seed=3)

    assert fit.b_noise_ci[0] < fit.b_noise < fit.b_noise_ci[1]
    assert fit.b_noise_ci[0] < 256 < fit.b_noise_ci[1]


def test_unreached_batch_sizes_are_excluded_and_reported():
    steps = 200 * (1 + 256 / POWERS)
    steps[-2:] = math.inf

    fit = fit_noise_scale(POWERS, steps)

    assert fit.ok
    assert fit.excluded == (2048, 4096)
    assert 4096 not in fit.batch_sizes
    assert fit.b_noise == pytest.approx(256, rel=1e-6)
    assert any("2048, 4096" in note for note in fit.notes)


def test_fewer_than_three_batch_sizes_is_not_ok_and_never_raises():
    fit = fit_noise_scale([8, 16, 32], [1000.0, 500.0, math.inf], n_boot=10)
    assert not fit.ok
    assert fit.reason == "fewer than 3 batch sizes reached the target (2)"
    assert math.isnan(fit.b_noise)
    assert fit.excluded == (32,)

    trials = pd.DataFrame(
        {"batch_size": [8, 8, 16, 32], "steps_to_target": [900.0, math.inf, 500.0, math.inf]}
    )
    fit = fit_noise_scale_from_trials(trials, n_boot=10)
    assert not fit.ok and fit.reason == "fewer than 3 batch sizes reached the target (2)"


def test_noise_scale_through_the_whole_pipeline(make_scaling_table):
    df = make_scaling_table(s_min=200, b_noise=256, noise=0.05, seed=2)
    trials = trial_steps_to_target(df, Target.parse("val_accuracy>=0.6"))

    fit = fit_noise_scale_from_trials(trials, n_boot=200, seed=0)

    # Learning rates on a coarse grid add up to 30% to the best trial's steps: looser bound.
    assert fit.ok
    assert fit.b_noise == pytest.approx(256, rel=0.3)
    assert fit.b_noise_ci[0] <= fit.b_noise <= fit.b_noise_ci[1]


def _ideal_curve() -> pd.DataFrame:
    """Perfect to 128, then a quarter fewer steps per doubling to 1024, then flat."""
    steps = []
    for b in POWERS:
        if b <= 128:
            steps.append(12800 / b)
        elif b <= 1024:
            steps.append(100 * 0.75 ** math.log2(b / 128))
        else:
            steps.append(100 * 0.75**3)
    return _steps_df(POWERS, steps)


def test_regimes_on_an_ideal_curve():
    regimes = scaling_regimes(_ideal_curve(), tolerance=0.2)

    assert regimes.ok
    assert regimes.perfect_end == 128
    assert regimes.max_parallel_start == 1024
    assert regimes.perfect == (8, 128)
    assert regimes.diminishing == (128, 1024)
    assert regimes.maximal == (1024, 4096)
    assert [regimes.regime(b) for b in (64, 256, 2048)] == ["perfect", "diminishing", "maximal"]
    table = regimes.table
    assert len(table) == POWERS.size - 1
    assert table["efficiency"].iloc[:4].tolist() == pytest.approx([1.0] * 4)
    assert table["speedup_per_doubling"].iloc[4] == pytest.approx(1 / 0.75)
    assert table["perfect"].tolist() == [True] * 4 + [False] * 5
    assert table["flat"].tolist() == [False] * 7 + [True] * 2


def test_regimes_edge_cases():
    perfect = scaling_regimes(_steps_df(POWERS, 1e5 / POWERS))
    assert perfect.perfect_end == 4096
    assert perfect.max_parallel_start is None and perfect.maximal is None
    assert perfect.diminishing is None

    flat = scaling_regimes(_steps_df(POWERS, np.full(POWERS.size, 50.0)))
    assert flat.perfect_end == 8 and flat.max_parallel_start == 8

    # Ratio 4 between batch sizes: ideal is a quarter of the steps; 0.28 is within 20%.
    quads = scaling_regimes(_steps_df([8, 32, 128, 512], [1000, 280, 78, 60]))
    assert quads.perfect_end == 128
    assert quads.table["batch_ratio"].tolist() == [4.0, 4.0, 4.0]

    # An unreached batch size is left out; one batch size is too few.
    gap = scaling_regimes(_steps_df([8, 16, 32], [1000, math.inf, math.inf]))
    assert not gap.ok and gap.excluded == (16, 32) and "fewer than 2" in gap.reason


def test_lr_power_law_recovers_alpha():
    rng = np.random.default_rng(0)
    lrs = 0.002 * POWERS**0.7 * rng.lognormal(0, 0.05, POWERS.size)

    fit = fit_lr_power_law(POWERS, lrs)

    assert fit.ok and fit.method == "t"
    assert fit.alpha == pytest.approx(0.7, abs=0.05)
    assert fit.alpha_ci[0] < 0.7 < fit.alpha_ci[1]
    assert fit.c == pytest.approx(0.002, rel=0.3)
    assert not fit.linear_in_ci and not fit.sqrt_in_ci and fit.rule == "neither"
    assert fit.predict(512) == pytest.approx(fit.c * 512**fit.alpha)

    boot = fit_lr_power_law(POWERS, lrs, n_boot=200, seed=1)
    assert boot.method == "bootstrap"
    assert boot.alpha == fit.alpha
    assert boot.alpha_ci[0] < 0.7 < boot.alpha_ci[1]


def test_lr_power_law_rules_and_thin_data():
    sqrt = fit_lr_power_law(POWERS, 0.001 * np.sqrt(POWERS))
    assert sqrt.alpha == pytest.approx(0.5) and sqrt.rule == "square-root"
    linear = fit_lr_power_law(POWERS, 0.001 * POWERS)
    assert linear.rule == "linear" and linear.linear_in_ci and not linear.sqrt_in_ci

    thin = fit_lr_power_law([8, 16, 32], [0.01, 0.02, math.nan])
    assert not thin.ok
    assert thin.reason == "fewer than 3 batch sizes with a best learning rate (2)"
    assert thin.excluded == (32,)


def _mcc_steps(b_noise=100.0) -> pd.DataFrame:
    steps = 1000 * (1 + b_noise / POWERS)
    return _steps_df(POWERS, steps, best_lr=0.01 * np.sqrt(POWERS / 8), lr_on_edge=False)


def test_recommend_batch_size_lr_and_speedups():
    steps_df = _mcc_steps(b_noise=100)
    fit = fit_noise_scale(POWERS, steps_df["steps_to_result"], n_boot=50)

    rec = recommend(steps_df, fit, None, 4)

    # Perfect scaling (20% tolerance) ends at 32; B_noise = 100 allows 64.
    assert rec.ok, rec.reason
    assert rec.batch_size == 64 and rec.per_device_batch == 16
    assert rec.regime == "diminishing"
    assert rec.learning_rate == pytest.approx(0.01 * math.sqrt(8)) and rec.lr_source == "measured"
    assert rec.base_batch_size == 8
    expected = (1 + 100 / 8) / (1 + 100 / 64)
    assert rec.step_speedup == pytest.approx(expected, rel=1e-4)
    assert rec.measured_step_speedup == pytest.approx(expected)
    assert rec.step_speedup_ci == pytest.approx((expected, expected), rel=1e-6)  # no noise
    # Ideal hardware: 16 examples per device per step against 8 on one device.
    assert rec.time_source == "ideal"
    assert rec.time_speedup == pytest.approx(rec.step_speedup * 4 * 8 / 64)

    assert recommend(steps_df, fit, None, 4, base_batch=16).base_batch_size == 16
    assert recommend(steps_df, fit, None, 1024).batch_size == 1024  # smallest divisible
    assert not recommend(steps_df, fit, None, 3).ok


def test_recommend_uses_throughput_and_lr_power_law():
    steps_df = _mcc_steps(b_noise=100)
    steps_df.loc[steps_df["batch_size"] == 64, "best_learning_rate"] = math.nan
    fit = fit_noise_scale(POWERS, steps_df["steps_to_result"])
    lr_fit = fit_lr_power_law(POWERS, 0.01 * np.sqrt(POWERS / 8))
    throughput = pd.DataFrame(
        {
            "strategy": ["default", "mirrored:4", "parameter_server"],
            "replicas": [1, 4, 4],
            "batch_size": [8, 64, 64],
            "seconds_per_step": [0.01, 0.005, 0.02],
        }
    )

    rec = recommend(steps_df, fit, throughput, 4, lr_fit=lr_fit)

    assert rec.time_source == "throughput" and rec.strategy == "mirrored:4"
    assert rec.time_speedup == pytest.approx(rec.step_speedup * 2)
    assert rec.lr_source == "power law"
    assert rec.learning_rate == pytest.approx(0.01 * math.sqrt(8))


def test_recommend_thin_data_is_not_ok():
    thin = _steps_df([8, 16, 32], [1000, 500, math.inf])
    fit = fit_noise_scale(thin["batch_size"], thin["steps_to_result"])

    rec = recommend(thin, fit, None, 2)

    assert not rec.ok
    assert rec.reason == "fewer than 3 batch sizes reached the target (2)"
    with pytest.raises(ValueError, match="accelerators must be >= 1"):
        recommend(thin, fit, None, 0)


def test_recommend_from_a_measured_table(make_scaling_table):
    df = make_scaling_table(
        batch_sizes=(8, 32, 128, 512, 2048),
        learning_rates=(0.01, 0.1),
        strategies=(("default", 1, 0.01), ("mirrored:2", 2, 0.01)),
    )
    target = Target.parse("val_accuracy>=0.6")
    steps = steps_to_result(df, target)
    fit = fit_noise_scale_from_trials(trial_steps_to_target(df, target), n_boot=50)

    rec = recommend(steps, fit, throughput_by_strategy(df, target), 2)

    assert rec.ok, rec.reason
    assert rec.batch_size in (128, 512)
    assert rec.step_speedup_ci[0] <= rec.step_speedup <= rec.step_speedup_ci[1]
    assert rec.time_source == "throughput" and rec.strategy == "mirrored:2"
