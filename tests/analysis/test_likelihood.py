"""The model's pieces: S(B) with a knee sharpness (McCandlish et al.'s curve at q = 1), the
Student-t trial noise that one lucky trial does not move, and intervals widened to the sandwich
covariance where the trials scatter more than the model says."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from study.analysis import likelihood
from study.analysis.likelihood import PARAMS, steps_curve
from study.analysis.surrogate import fit_surrogate
from tests.analysis.test_surrogate import trials_of


def theta_of(**values: float) -> np.ndarray:
    theta = np.zeros(len(PARAMS))
    for name, value in values.items():
        theta[PARAMS.index(name)] = value
    return theta


def test_a_knee_of_one_is_mccandlish_s_curve():
    b = np.array([8.0, 64.0, 300.0, 4096.0])
    theta = theta_of(log_s_min=math.log(120.0), log_b_noise=math.log(300.0))

    assert steps_curve(theta, b)[0] == pytest.approx(120.0 * (1.0 + 300.0 / b))


def test_b_noise_is_the_crossing_of_the_asymptotes_for_every_knee():
    theta = theta_of(log_s_min=math.log(100.0), log_b_noise=math.log(256.0))
    for q in (1.0, 3.0, 8.0):
        theta[PARAMS.index("log_knee")] = math.log(q)
        tiny, huge, at = steps_curve(theta, np.array([1e-6, 1e7, 256.0]))[0]
        assert tiny * 1e-6 == pytest.approx(100.0 * 256.0, rel=1e-6)  # E_min / B below
        assert huge == pytest.approx(100.0, rel=1e-4)  # S_min above
        assert at == pytest.approx(100.0 * 2.0 ** (1.0 / q))  # a sharper knee hugs the corner


def test_the_knee_is_recovered_and_mccandlish_data_read_near_one():
    sharp = fit_surrogate(trials_of(np.random.default_rng(0), knee=3.0, per_batch=14))
    plain = fit_surrogate(trials_of(np.random.default_rng(0), per_batch=14))

    assert sharp.knee == pytest.approx(3.0, rel=0.35)
    assert sharp.b_noise == pytest.approx(200.0, rel=0.2)
    assert plain.knee < 1.6
    # The old form misreads a sharp knee: B_noise far off and S(B) rejected.
    held = fit_surrogate(trials_of(np.random.default_rng(0), knee=3.0, per_batch=14), knee=False)
    assert held.knee == 1.0 and abs(math.log(held.b_noise / 200.0)) > 0.2
    assert held.misfits and not sharp.misfits


def test_student_t_density_and_tail_match_scipy_and_reach_the_normal():
    z = np.linspace(-6.0, 6.0, 13)[None, :]
    for tau in (0.05, 0.25, 0.4):
        t = np.array([[tau]])
        expected = stats.t.logpdf(z, df=1.0 / tau)
        assert likelihood._log_density(z, t) == pytest.approx(expected, abs=1e-9)
        assert likelihood._log_cdf(z, t) == pytest.approx(stats.t.logcdf(z, 1 / tau), abs=1e-9)
    zero = np.zeros((1, 1))
    assert likelihood._log_density(z, zero) == pytest.approx(stats.norm.logpdf(z), abs=1e-12)
    # Smooth down to the normal (the optimiser's differences cross tau = 0).
    near = likelihood._log_density(z, np.full((1, 1), 1e-6))
    assert near == pytest.approx(stats.norm.logpdf(z), abs=1e-3)
    assert likelihood._log_cdf(z, np.full((1, 1), 1e-6)) == pytest.approx(
        stats.norm.logcdf(z), abs=1e-3
    )


def test_rows_of_normal_and_student_t_noise_each_get_their_own_density():
    # The all-normal shortcut must not apply when only some rows are normal.
    z = np.linspace(-4.0, 4.0, 9)[None, :].repeat(2, axis=0)
    tau = np.array([[0.0], [0.25]])
    density, tail = likelihood._log_density(z, tau), likelihood._log_cdf(z, tau)
    assert density[0] == pytest.approx(stats.norm.logpdf(z[0]), abs=1e-12)
    assert density[1] == pytest.approx(stats.t.logpdf(z[1], df=4.0), abs=1e-9)
    assert tail[0] == pytest.approx(stats.norm.logcdf(z[0]), abs=1e-12)
    assert tail[1] == pytest.approx(stats.t.logcdf(z[1], df=4.0), abs=1e-9)


def test_one_lucky_trial_moves_the_normal_fit_and_not_the_student_t_one():
    clean = trials_of(np.random.default_rng(7), sigma=0.08)
    lucky = trials_of(np.random.default_rng(7), sigma=0.08, outlier=1.2)
    moved = {}
    for noise in ("normal", "student-t"):
        before = fit_surrogate(clean, noise=noise)
        after = fit_surrogate(lucky, noise=noise)
        moved[noise] = abs(math.log(after.b_noise / before.b_noise))
        if noise == "student-t":
            assert after.value("tail") > 0.1  # the data chose a heavy tail

    assert moved["normal"] > 0.1
    assert moved["student-t"] < moved["normal"] / 3


def test_an_unknown_noise_is_refused():
    with pytest.raises(ValueError, match="noise must be one of normal, student-t"):
        fit_surrogate(trials_of(np.random.default_rng(0)), noise="cauchy")


def test_the_mean_log_steps_gradient_is_one_in_log_s_min_and_matches_a_step():
    fit = fit_surrogate(trials_of(np.random.default_rng(1)))
    b = np.array([16.0, 64.0, 256.0, 1024.0])
    log_lr = np.log(fit.best_lr(b)) + np.array([-0.5, 0.0, 0.3, 0.1])
    params = [PARAMS.index("log_s_min"), PARAMS.index("log_b_noise"), PARAMS.index("lr_level")]
    grad = likelihood.mean_log_steps_gradient(fit.theta, params, b, log_lr, fit.b_ref)
    assert grad.shape == (3, b.size)
    assert grad[0] == pytest.approx(np.ones(b.size))  # log S_min shifts every mean by itself
    # A small step in log B_noise moves the means by about the gradient times the step.
    moved = fit.theta.copy()
    moved[params[1]] += 1e-3
    change = likelihood.mean_log_steps(moved, b, log_lr, fit.b_ref) - likelihood.mean_log_steps(
        fit.theta, b, log_lr, fit.b_ref
    )
    assert change == pytest.approx(1e-3 * grad[1], rel=1e-2, abs=1e-9)
    assert np.all(grad[1] > 0)  # a larger B_noise: more steps at every batch size
