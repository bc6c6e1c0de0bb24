"""The parameters' covariance: never narrower than the likelihood's curvature says, wider where
the model misfits, raised for every combination, a variance for a parameter on a cap or floor
only; the residual degrees of freedom, the small-sample test and the Student-t draws."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from study.analysis import surrogate
from study.analysis.answers import scaling_answers
from study.analysis.covariance import (
    CAPPED,
    DOF_FLOOR,
    FLOORED,
    LEVERAGE_MAX,
    Component,
    apportion,
    at_least,
    is_free,
    leverages,
    parameter_covariance,
    ratio_p_value,
    residual_dof,
    sample,
    sample_mixture,
    square_root,
)
from study.analysis.fitting import hessian
from study.analysis.likelihood import PARAMS, Trials, log_likelihoods
from study.analysis.parameters import Param
from study.analysis.surrogate import fit_surrogate
from tests.analysis.test_surrogate import SIZES, trials_of


def test_intervals_are_never_narrower_than_the_models_and_widen_where_it_misfits():
    def widths(trials) -> tuple[np.ndarray, np.ndarray, list[int]]:
        fit = fit_surrogate(trials)
        data = Trials.of(trials)
        options = surrogate._Options(bend=fit.shape == "bends", knee=True, heavy_tails=False)
        cov, _ = parameter_covariance(data, fit.theta, surrogate._bounds(data, options))
        free = [i for i in range(len(PARAMS)) if cov[i, i] > 0]
        inverse = np.linalg.inv(hessian(lambda p: -log_likelihoods(p, data), fit.theta, free))
        # The model's covariance is the curvature's inverse (no n / (n - p) factor: the draws'
        # Student-t carries the small-sample uncertainty).
        return np.sqrt(np.diag(cov)[free]), np.sqrt(np.diag(inverse)), free

    robust, model, _ = widths(trials_of(np.random.default_rng(1)))
    assert np.all(robust >= model * 0.999)
    assert np.median(robust / model) < 1.3  # the model holds: about the same

    # Trial noise ten times larger at the two largest batch sizes than elsewhere.
    rng = np.random.default_rng(1)
    trials = trials_of(rng, sigma=0.03)
    big = trials["batch_size"] >= SIZES[-2]
    shift = np.exp(rng.normal(0.0, 0.4, size=int(big.sum())))
    trials.loc[big, "steps_to_target"] = np.ceil(trials.loc[big, "steps_to_target"] * shift)
    trials.loc[big, "last_step"] = np.where(
        np.isfinite(trials.loc[big, "steps_to_target"]),
        trials.loc[big, "steps_to_target"],
        trials.loc[big, "last_step"],
    )
    robust, model, free = widths(trials)
    b_noise = free.index(PARAMS.index("log_b_noise"))
    assert robust[b_noise] > 1.2 * model[b_noise]


def test_the_raised_covariance_is_at_least_both_for_every_combination():
    rng = np.random.default_rng(0)
    a, b = (m @ m.T for m in rng.normal(size=(2, 4, 4)))
    both = at_least(a, b)
    for _ in range(200):
        v = rng.normal(size=4)
        assert v @ both @ v >= max(v @ a @ v, v @ b @ v) - 1e-9
    assert np.allclose(at_least(a, a), a)


def test_a_parameter_on_a_bound_has_a_variance_only_on_a_cap_or_a_floor():
    knee, alpha, k, slope = Param.LOG_KNEE, Param.ALPHA, Param.LOG_K, Param.LOG_SLOPE_LOW
    assert knee in CAPPED and knee in FLOORED and alpha not in CAPPED
    assert is_free(alpha, 0.5, -3.0, 3.0)  # inside
    assert not is_free(alpha, 3.0, -3.0, 3.0)  # on a bound of the model
    assert not is_free(alpha, -3.0, -3.0, 3.0)
    assert is_free(knee, math.log(8.0), 0.0, math.log(8.0))  # on its cap: "at least this sharp"
    assert is_free(knee, 0.0, 0.0, math.log(8.0))  # on McCandlish's q = 1: "no softer"
    assert not is_free(knee, 0.0, 0.0, 0.0)  # held
    assert is_free(k, math.log(30.0), -6.9, math.log(30.0))  # a cliff above the best rate
    assert not is_free(k, -6.9, -6.9, math.log(30.0))  # its floor is not one
    assert not is_free(slope, math.log(20.0), math.log(0.05), math.log(20.0))


FLAT_HELD_FIT = Path(__file__).with_name("data") / "cnn_adam_flat_held_fit.csv"
"""A real study's trials (run 9 of the CNN with Adam of `benchmarks/answer_truth.py`): its q = 1
fit puts the smooth bottom's curvature on its cap, and the curvature along it is flat."""


def test_the_held_fits_sandwich_leaves_its_flat_directions_out():
    trials = pd.read_csv(FLAT_HELD_FIT)
    fit = fit_surrogate(trials)
    held = fit.knee_held
    assert held is not None and 0.2 < held.weight < 0.9
    data = Trials.of(trials)
    options = surrogate._Options(
        bend=fit.shape == "bends", knee=False, heavy_tails=False, smooth=fit.bottom == "smooth"
    )
    bounds = surrogate._bounds(data, options)
    low, high = bounds[Param.LOG_C_LOW]
    assert held.theta[Param.LOG_C_LOW] == pytest.approx(high)  # the bottom on its cap
    whole, _ = parameter_covariance(data, held.theta, bounds)
    pinned, _ = parameter_covariance(data, held.theta, bounds, pinned=True)
    b = Param.LOG_B_NOISE
    # The whole sandwich multiplies the flat direction's floor variance into B_noise.
    assert math.sqrt(whole[b, b]) > 2.0 and math.sqrt(pinned[b, b]) < 0.5
    np.testing.assert_allclose(held.covariance, pinned)  # the fit reads the held one pinned
    # the held fit's curvature has a flat direction (its smallest eigenvalue about 0)
    free = [i for i in range(len(PARAMS)) if pinned[i, i] > 0]
    curvature = hessian(lambda p: -log_likelihoods(p, data), held.theta, free)
    values = np.linalg.eigvalsh(curvature)
    assert values.min() < 1e-4 * values.max() and low < high  # flat
    answers = scaling_answers(fit, accelerators=8)
    assert 50.0 < answers.b_noise.low < answers.b_noise.high < 1000.0  # was 0.28 to 128,000


def test_residual_dof_counts_exact_trials_fully_and_censored_ones_by_what_they_say():
    trials = trials_of(np.random.default_rng(1), budget=1e9)  # every trial exact
    fit = fit_surrogate(trials)
    data = Trials.of(trials)
    free = [i for i in range(len(PARAMS)) if fit.covariance[i, i] > 0]
    n_eff, dof = residual_dof(data, fit.theta, free)
    assert n_eff == pytest.approx(data.n, rel=1e-3)
    assert dof == pytest.approx(n_eff - (len(free) - 1))  # log_sigma is not a mean parameter
    assert (fit.effective_trials, fit.dof) == pytest.approx((n_eff, dof))

    # A trial stopped far short of the model's mean says nothing; one stopped at it, about
    # 2 / pi of an exact one (the censored normal's information at its mean).
    mean = fit.predict(trials["batch_size"].to_numpy(), trials["learning_rate"].to_numpy())
    for factor, share in ((0.1, 0.0), (1.0, 2.0 / math.pi)):
        cut = trials.assign(steps_to_target=math.inf, last_step=np.ceil(mean * factor))
        n_both, _ = residual_dof(Trials.of(pd.concat([trials, cut])), fit.theta, free)
        assert (n_both - n_eff) / len(cut) == pytest.approx(share, abs=0.02)


def test_leverages_sum_to_the_means_parameters_and_a_lone_trial_pins_its_own():
    trials = trials_of(np.random.default_rng(1), budget=1e9)  # every trial exact
    fit = fit_surrogate(trials)
    data = Trials.of(trials)
    free = [i for i in range(len(PARAMS)) if fit.covariance[i, i] > 0]
    inverse = np.linalg.inv(hessian(lambda p: -log_likelihoods(p, data), fit.theta, free))
    h = leverages(data, fit.theta, free, inverse)
    assert np.all((h >= 0.0) & (h <= LEVERAGE_MAX))
    # As a linear model's hat matrix: the trace is the number of the mean's parameters.
    assert h.sum() == pytest.approx(len(free) - 1, rel=0.05)  # log_sigma is not the mean's
    # Many trials share each batch size's curve: none of them pins it alone.
    assert h.max() < 0.8 * LEVERAGE_MAX

    # One lone trial at a batch size far above the rest pins S(B) there by itself.
    lone = trials.iloc[[0]].assign(batch_size=4 * SIZES[-1])
    grown = pd.concat([trials, lone], ignore_index=True)
    fit = fit_surrogate(grown)
    data = Trials.of(grown)
    free = [i for i in range(len(PARAMS)) if fit.covariance[i, i] > 0]
    inverse = np.linalg.inv(hessian(lambda p: -log_likelihoods(p, data), fit.theta, free))
    h = leverages(data, fit.theta, free, inverse)
    assert h[-1] == LEVERAGE_MAX  # read at the cap


def test_the_sandwich_reads_each_trial_through_its_leverage(monkeypatch):
    trials = trials_of(np.random.default_rng(1), budget=1e9)
    lone = trials.iloc[[0]].assign(batch_size=4 * SIZES[-1])
    grown = pd.concat([trials, lone], ignore_index=True)
    fit = fit_surrogate(grown)
    data = Trials.of(grown)
    options = surrogate._Options(bend=fit.shape == "bends", knee=True, heavy_tails=False)
    bounds = surrogate._bounds(data, options)
    with_leverage, _ = parameter_covariance(data, fit.theta, bounds)
    monkeypatch.setattr("study.analysis.covariance.leverages", lambda data, *_: np.zeros(data.n))
    raw, _ = parameter_covariance(data, fit.theta, bounds)
    # HC2 raises the sandwich (the batch effects, raised to after it, may take back a little),
    # and most where a lone trial pins the curve.
    assert np.all(np.diag(with_leverage) >= np.diag(raw) * 0.98)
    assert np.max(np.diag(with_leverage) / np.maximum(np.diag(raw), 1e-300)) > 1.2


def test_a_likelihood_ratio_with_few_degrees_of_freedom_left_says_less():
    chi2_5 = 3.841
    assert ratio_p_value(chi2_5, 1e5, 1e5 - 8) == pytest.approx(0.05, abs=1e-3)
    assert ratio_p_value(chi2_5, 60, 50) == pytest.approx(0.075, abs=0.005)
    assert ratio_p_value(chi2_5, 10, 3) > 0.3
    assert ratio_p_value(chi2_5, 10, 0.0) == 1.0  # nothing left to measure the noise with
    assert ratio_p_value(20.0, 10, 3) < ratio_p_value(10.0, 10, 3) < ratio_p_value(chi2_5, 10, 3)


def test_draws_are_student_t_with_the_fits_degrees_of_freedom_within_bounds():
    cov = np.diag([1.0, 4.0])
    cov[0, 1] = cov[1, 0] = 1.0
    bounds = np.array([(-np.inf, np.inf), (-np.inf, np.inf)])
    rng = np.random.default_rng(0)
    for dof, q in ((50.0, stats.t.ppf(0.975, 50)), (1.0, stats.t.ppf(0.975, DOF_FLOOR))):
        draws = sample(Component(1.0, np.zeros(2), cov, dof), 200_000, rng, bounds)
        assert np.quantile(draws[:, 0], 0.975) == pytest.approx(q, rel=0.03)
        assert np.quantile(draws[:, 1], 0.975) == pytest.approx(2.0 * q, rel=0.03)

    # Beyond a projected bound: onto it, the other parameter moved as the covariance pairs it.
    bounds = np.array([(0.0, np.inf), (-1.0, 1.0)])
    draws = sample(Component(1.0, np.zeros(2), cov, 1e6), 20_000, rng, bounds, project=(0,))
    assert draws[:, 0].min() == 0.0 and np.all(np.abs(draws[:, 1]) <= 1.0)
    held = draws[:, 0] == 0.0
    assert 0.45 < held.mean() < 0.55
    # At the bound the second parameter is its conditional mean (0) plus its conditional
    # spread (var 4 - 1 = 3): clipped to [-1, 1], half of it below 0.
    assert abs(np.median(draws[held, 1])) < 0.05
    assert np.mean(np.abs(draws[held, 1]) == 1.0) == pytest.approx(
        2 * stats.norm.sf(1 / 3**0.5), abs=0.03
    )


def test_the_square_root_is_symmetric_and_moves_with_the_covariance_not_its_eigenbasis():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 4))
    cov = a @ a.T
    cov[3, :] = cov[:, 3] = 0.0  # a parameter held: a zero eigenvalue
    root = square_root(cov)
    np.testing.assert_allclose(root, root.T, atol=1e-12)
    np.testing.assert_allclose(root @ root, cov, atol=1e-10)
    # A covariance a rounding away: eigh's basis may flip a sign, the root does not move.
    noise = 1e-12 * rng.normal(size=cov.shape)
    nudged = square_root(cov + noise + noise.T)
    assert np.abs(nudged - root).max() < 1e-6 * np.abs(root).max()
    # A rounding's negative eigenvalue reads as 0, never as NaN.
    assert np.all(np.isfinite(square_root(np.array([[1.0, 1.0], [1.0, 1.0 - 1e-15]]))))


@pytest.mark.parametrize(
    ("n", "weights"),
    [(4000, (0.5668, 0.0965, 0.3367)), (7, (1, 1, 1)), (10, (1.0, -1e-17)), (3, (0.2, 0.8))],
)
def test_apportion_gives_every_share_its_floor_and_the_largest_remainders_the_rest(n, weights):
    counts = apportion(n, weights)
    shares = n * np.maximum(weights, 0) / np.sum(np.maximum(weights, 0))
    assert sum(counts) == n
    assert all(math.floor(s) <= c <= math.floor(s) + 1 for s, c in zip(shares, counts))
    assert apportion(n, weights) == counts  # no randomness


def _mixture(weights: tuple[float, ...], n: int = 4000, seed: int | np.random.Generator = 5):
    parts = [
        Component(w, np.array([100.0 * k, -100.0 * k]), np.diag([1.0, 0.25]), 8.0)
        for k, w in enumerate(weights)
    ]
    bounds = np.array([(-np.inf, np.inf)] * 2)
    return sample_mixture(parts, n, seed, bounds)


def test_a_mixture_weight_a_rounding_away_moves_a_few_draws_not_all():
    before = _mixture((0.5668, 0.0965, 0.3367))
    after = _mixture((0.5689, 0.0969, 0.3342))  # another CPU's held fits
    assert before.shape == after.shape == (4000, 2)
    kept = {tuple(r) for r in before.tolist()} & {tuple(r) for r in after.tolist()}
    assert len(kept) >= 4000 - 15  # 10 draws change component; the rest are the same draws
    for q in (0.025, 0.5, 0.975):
        assert np.quantile(after[:, 0], q) == pytest.approx(np.quantile(before[:, 0], q), abs=0.1)
    # Each component in its share (the components lie 100 apart), shuffled.
    component = np.round(before[:, 0] / 100.0).astype(int)
    assert np.bincount(component).tolist() == apportion(4000, (0.5668, 0.0965, 0.3367))
    assert np.any(np.diff(component) < 0)  # shuffled, not stacked in component order
    # The same draws again from the same seed or generator, others from another.
    np.testing.assert_array_equal(before, _mixture((0.5668, 0.0965, 0.3367)))
    np.testing.assert_array_equal(
        _mixture((0.5, 0.5), seed=np.random.default_rng(9)),
        _mixture((0.5, 0.5), seed=np.random.default_rng(9)),
    )
    assert not np.array_equal(_mixture((0.5, 0.5), seed=1), _mixture((0.5, 0.5), seed=2))
