"""recommend: the batch size, learning rate and speed-ups for N accelerators."""

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
    steps_to_result,
    throughput_by_strategy,
    trial_steps_to_target,
)
from study.config.target import Target

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


@pytest.fixture
def mcc_steps(make_steps) -> pd.DataFrame:
    """Noiseless McCandlish steps with B_noise = 100 and square-root best learning rates."""
    steps = 1000 * (1 + 100 / POWERS)
    return make_steps(
        POWERS, steps, best_learning_rate=0.01 * np.sqrt(POWERS / 8), lr_on_edge=False
    )


def test_recommend_batch_size_lr_and_speedups(mcc_steps):
    fit = fit_noise_scale(POWERS, mcc_steps["steps_to_result"])

    rec = recommend(mcc_steps, fit, None, 4)

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

    assert recommend(mcc_steps, fit, None, 4, base_batch=16).base_batch_size == 16
    largest = recommend(mcc_steps, fit, None, 1024)
    assert largest.batch_size == 1024  # the smallest divisible, beyond B_noise
    assert any("took the smallest divisible by 1024" in n for n in largest.notes)
    assert not recommend(mcc_steps, fit, None, 3).ok


def test_recommend_uses_throughput_and_lr_power_law(mcc_steps):
    mcc_steps.loc[mcc_steps["batch_size"] == 64, "best_learning_rate"] = math.nan
    fit = fit_noise_scale(POWERS, mcc_steps["steps_to_result"])
    lr_fit = fit_lr_power_law(POWERS, 0.01 * np.sqrt(POWERS / 8))
    throughput = pd.DataFrame(
        {
            "strategy": ["default", "mirrored:4", "parameter_server"],
            "replicas": [1, 4, 4],
            "batch_size": [8, 64, 64],
            "seconds_per_step": [0.01, 0.005, 0.02],
        }
    )

    rec = recommend(mcc_steps, fit, throughput, 4, lr_fit=lr_fit)

    assert rec.time_source == "throughput" and rec.strategy == "mirrored:4"
    assert rec.time_speedup == pytest.approx(rec.step_speedup * 2)
    assert rec.lr_source == "power law"
    assert rec.learning_rate == pytest.approx(0.01 * math.sqrt(8))


def test_recommend_thin_data_is_not_ok(make_steps):
    thin = make_steps([8, 16, 32], [1000, 500, math.inf])
    fit = fit_noise_scale(thin["batch_size"], thin["steps_to_result"])

    rec = recommend(thin, fit, None, 2)

    assert not rec.ok
    assert rec.reason == "fewer than 3 batch sizes reached the target (2)"
    with pytest.raises(ValueError, match="accelerators must be >= 1"):
        recommend(thin, fit, None, 0)


def test_an_unmeasured_base_batch_is_refused(mcc_steps):
    fit = fit_noise_scale(POWERS, mcc_steps["steps_to_result"])

    rec = recommend(mcc_steps, fit, None, 4, base_batch=12)

    assert not rec.ok and rec.reason.startswith("base batch size 12 did not reach the target")


def test_recommend_from_a_measured_table(make_scaling_table):
    df = make_scaling_table(
        batch_sizes=(8, 32, 128, 512, 2048),
        learning_rates=(0.01, 0.1),
        strategies=(("default", 1, 0.01), ("mirrored:2", 2, 0.01)),
    )
    target = Target.parse("val_accuracy>=0.6")
    steps = steps_to_result(df, target)
    fit = fit_noise_scale_from_trials(trial_steps_to_target(df, target))

    rec = recommend(steps, fit, throughput_by_strategy(df, target), 2)

    assert rec.ok, rec.reason
    assert rec.batch_size in (128, 512)
    assert rec.step_speedup_ci[0] <= rec.step_speedup <= rec.step_speedup_ci[1]
    assert rec.time_source == "throughput" and rec.strategy == "mirrored:2"
