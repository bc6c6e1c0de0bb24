"""fit_noise_scale and fit_noise_scale_from_trials: McCandlish's S(B), its profile intervals,
evaluation brackets and thin data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from study.analysis import (
    MIN_BATCH_SIZES,
    SEARCH_FACTOR,
    fit_noise_scale,
    fit_noise_scale_from_trials,
    trial_crossings,
    trial_steps_to_target,
)
from study.analysis.noise_scale import PROFILE
from study.config.target import Target

POWERS = np.array([2**k for k in range(3, 13)])  # 8 ... 4096


def test_noise_scale_recovered_from_noisy_trials_with_intervals(make_trial_steps):
    # Known S_min=200, B_noise=256; 5 trials per batch size, each with 10% lognormal noise.
    trials = make_trial_steps(s_min=200, b_noise=256, trials_per_batch=5, noise=0.1, seed=0)

    fit = fit_noise_scale_from_trials(trials)

    assert fit.ok, fit.reason
    assert fit.method == PROFILE
    assert fit.b_noise == pytest.approx(256, rel=0.15)
    low, high = fit.b_noise_ci
    assert low <= 256 <= high
    assert low < fit.b_noise < high
    assert fit.e_min == pytest.approx(fit.s_min * fit.b_noise)
    assert fit.s_min_ci[0] < fit.s_min_ci[1] and fit.e_min_ci[0] < fit.e_min_ci[1]
    assert not hasattr(fit, "n_boot")  # nothing is resampled
    band_low, band_high = fit.steps_band([8, 256, 4096])
    assert np.all(band_low < fit.predict_steps([8, 256, 4096]))
    assert np.all(fit.predict_steps([8, 256, 4096]) < band_high)


def test_a_lower_confidence_gives_a_narrower_interval(make_trial_steps):
    trials = make_trial_steps(trials_per_batch=5, noise=0.1, seed=0)

    wide = fit_noise_scale_from_trials(trials)
    narrow = fit_noise_scale_from_trials(trials, confidence=0.9)

    assert wide.confidence == 0.95 and narrow.confidence == 0.9
    assert narrow.b_noise == wide.b_noise  # same point estimate
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
    assert fit_noise_scale(POWERS, steps, intervals=False).steps_band(256) is None


def test_profile_interval_brackets_estimate_and_truth():
    rng = np.random.default_rng(1)
    steps = 200 * (1 + 256 / POWERS) * rng.lognormal(0, 0.05, POWERS.size)

    fit = fit_noise_scale(POWERS, steps)

    assert fit.b_noise_ci[0] < fit.b_noise < fit.b_noise_ci[1]
    assert fit.b_noise_ci[0] < 256 < fit.b_noise_ci[1]
    assert fit.s_min_ci[0] < fit.s_min < fit.s_min_ci[1]
    assert fit.e_min_ci[0] < fit.e_min < fit.e_min_ci[1]


def _sse(b: np.ndarray, s: np.ndarray, b_noise: float, s_min: float | None = None) -> float:
    """Residual sum of squares of log steps; the best S_min for this B_noise when None."""
    shape = np.log1p(b_noise / b)
    level = np.mean(np.log(s) - shape) if s_min is None else math.log(s_min)
    return float(np.sum((np.log(s) - shape - level) ** 2))


def test_interval_ends_are_where_the_profile_reaches_the_f_limit():
    # The definition: a value is inside when the best fit holding it there has a sum of squares
    # within SSE_min (1 + F(1, n-2) / (n-2)); at the ends it is exactly on that limit.
    rng = np.random.default_rng(4)
    b = np.array([8, 16, 32, 64, 128, 256, 512, 1024], dtype=float)
    s = 300 * (1 + 100 / b) * rng.lognormal(0, 0.1, b.size)

    fit = fit_noise_scale(b, s)

    sse_min = _sse(b, s, fit.b_noise)
    limit = sse_min * (1 + stats.f.ppf(0.95, 1, b.size - 2) / (b.size - 2))
    for end in fit.b_noise_ci:
        assert _sse(b, s, end) == pytest.approx(limit, rel=1e-6)
    # S_min's ends: no B_noise fits better with S_min held there (the grid is 0.5% fine).
    for end in fit.s_min_ci:
        best = min(_sse(b, s, bn, end) for bn in np.geomspace(1, 1e5, 20001))
        assert best == pytest.approx(limit, rel=2e-3)
    assert fit.residual_rms == pytest.approx(math.sqrt(sse_min / b.size))


def test_speedup_interval_maps_the_b_noise_interval():
    rng = np.random.default_rng(4)
    steps = 200 * (1 + 256 / POWERS) * rng.lognormal(0, 0.1, POWERS.size)
    fit = fit_noise_scale(POWERS, steps)

    def ratio(b_noise: float) -> float:
        return (1 + b_noise / 8) / (1 + b_noise / 128)

    low, high = fit.speedup_interval(8, 128)

    assert fit.speedup(8, 128) == pytest.approx(ratio(fit.b_noise))
    assert (low, high) == pytest.approx((ratio(fit.b_noise_ci[0]), ratio(fit.b_noise_ci[1])))
    assert low < fit.speedup(8, 128) < high
    assert fit.speedup_interval(8, 8) == pytest.approx((1.0, 1.0))
    narrow = fit.speedup_interval(8, 128, confidence=0.5)
    assert low < narrow[0] < narrow[1] < high


def test_steps_band_holds_the_fit_and_narrows_with_confidence():
    rng = np.random.default_rng(4)
    steps = 200 * (1 + 256 / POWERS) * rng.lognormal(0, 0.1, POWERS.size)
    fit = fit_noise_scale(POWERS, steps)
    grid = np.geomspace(8, 4096, 50)

    low, high = fit.steps_band(grid)
    narrow_low, narrow_high = fit.steps_band(grid, confidence=0.5)

    assert np.all(low < fit.predict_steps(grid)) and np.all(fit.predict_steps(grid) < high)
    assert np.all(low < narrow_low) and np.all(narrow_high < high)
    examples_low, examples_high = fit.examples_band(grid)
    assert examples_low == pytest.approx(grid * low)
    assert examples_high == pytest.approx(grid * high)
    # The band's ends at a huge batch size are the interval of S_min.
    assert fit.steps_band(1e15)[0][0] == pytest.approx(fit.s_min_ci[0], rel=1e-6)


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
    fit = fit_noise_scale([8, 16, 32], [1000.0, 500.0, math.inf])
    assert not fit.ok
    assert fit.reason == "fewer than 3 batch sizes reached the target (2)"
    assert math.isnan(fit.b_noise)
    assert fit.excluded == (32,)

    trials = pd.DataFrame(
        {"batch_size": [8, 8, 16, 32], "steps_to_target": [900.0, math.inf, 500.0, math.inf]}
    )
    fit = fit_noise_scale_from_trials(trials)
    assert not fit.ok and fit.reason == "fewer than 3 batch sizes reached the target (2)"


def test_bad_input_raises():
    with pytest.raises(ValueError, match="same length"):
        fit_noise_scale([8, 16], [1.0])
    with pytest.raises(ValueError, match="batch sizes must be > 0"):
        fit_noise_scale([0, 16, 32], [3.0, 2.0, 1.0])


def test_noise_scale_through_the_whole_pipeline(make_scaling_table):
    df = make_scaling_table(s_min=200, b_noise=256, noise=0.05, seed=2)
    trials = trial_steps_to_target(df, Target.parse("val_accuracy>=0.6"))

    fit = fit_noise_scale_from_trials(trial_crossings(df, Target.parse("val_accuracy>=0.6")))

    # Learning rates on a coarse grid add up to 30% to the best trial's steps: looser bound.
    assert fit.ok
    assert fit.b_noise == pytest.approx(256, rel=0.3)
    assert fit.b_noise_ci[0] < fit.b_noise < fit.b_noise_ci[1]
    unbracketed = fit_noise_scale_from_trials(trials)
    assert unbracketed.b_noise == pytest.approx(fit.b_noise, rel=0.05)
    assert fit.s_min < unbracketed.s_min  # the crossing lies before the first hit


def test_best_trial_is_fitted_at_the_midpoint_of_its_evaluation_bracket():
    trials = pd.DataFrame(
        {
            "batch_size": [8, 8, 16, 32, 64],
            "steps_to_target": [1210.0, 1000.0, 540.0, 300.0, math.inf],
            "previous_step": [1100.0, 900.0, 500.0, 250.0, math.nan],
        }
    )

    fit = fit_noise_scale_from_trials(trials)

    assert fit.batch_sizes == (8, 16, 32) and fit.excluded == (64,)
    assert fit.steps == pytest.approx([math.sqrt(900e3), math.sqrt(540 * 500), math.sqrt(75e3)])
    first_hits = fit_noise_scale_from_trials(trials.drop(columns="previous_step"))
    assert first_hits.steps == (1000.0, 540.0, 300.0)


def test_no_intervals_when_not_asked_for(make_trial_steps):
    fit = fit_noise_scale_from_trials(make_trial_steps(seed=0), intervals=False)

    assert fit.ok and fit.method == ""
    assert fit.b_noise_ci is None and fit.s_min_ci is None and fit.e_min_ci is None
    assert fit.steps_band(64) is None and fit.speedup_interval(8, 64) is None
