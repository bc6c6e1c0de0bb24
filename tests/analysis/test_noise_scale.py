"""fit_noise_scale and fit_noise_scale_from_trials: McCandlish's S(B), its bootstrap, thin data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis import (
    MIN_BATCH_SIZES,
    SEARCH_FACTOR,
    fit_noise_scale,
    fit_noise_scale_from_trials,
    trial_steps_to_target,
)
from study.config.target import Target

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


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


def test_a_lower_confidence_gives_a_narrower_interval(make_trial_steps):
    trials = make_trial_steps(trials_per_batch=5, noise=0.1, seed=0)

    wide = fit_noise_scale_from_trials(trials, n_boot=200, seed=0)
    narrow = fit_noise_scale_from_trials(trials, n_boot=200, seed=0, confidence=0.9)

    assert wide.confidence == 0.95 and narrow.confidence == 0.9
    assert narrow.b_noise == wide.b_noise  # same point estimate, same replicates
    assert wide.b_noise_ci[0] <= narrow.b_noise_ci[0] < narrow.b_noise_ci[1] <= wide.b_noise_ci[1]
    assert narrow.b_noise_ci != wide.b_noise_ci


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


def test_perfect_scaling_puts_b_noise_on_the_search_bound():
    # Steps halve with every doubling: B_noise is pushed to SEARCH_FACTOR x the largest batch.
    fit = fit_noise_scale(POWERS, 1e5 / POWERS)

    assert fit.ok
    assert fit.b_noise == pytest.approx(POWERS.max() * SEARCH_FACTOR, rel=1e-3)
    assert any("upper search bound" in note for note in fit.notes)


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
    assert MIN_BATCH_SIZES == 3
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


def test_bad_input_raises():
    with pytest.raises(ValueError, match="same length"):
        fit_noise_scale([8, 16], [1.0])
    with pytest.raises(ValueError, match="batch sizes must be > 0"):
        fit_noise_scale([0, 16, 32], [3.0, 2.0, 1.0])


def test_noise_scale_through_the_whole_pipeline(make_scaling_table):
    df = make_scaling_table(s_min=200, b_noise=256, noise=0.05, seed=2)
    trials = trial_steps_to_target(df, Target.parse("val_accuracy>=0.6"))

    fit = fit_noise_scale_from_trials(trials, n_boot=200, seed=0)

    # Learning rates on a coarse grid add up to 30% to the best trial's steps: looser bound.
    assert fit.ok
    assert fit.b_noise == pytest.approx(256, rel=0.3)
    assert fit.b_noise_ci[0] <= fit.b_noise <= fit.b_noise_ci[1]
