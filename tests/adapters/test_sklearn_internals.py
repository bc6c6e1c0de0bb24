"""`study.adapters.sklearn_internals` against the installed scikit-learn: a fitted Gaussian
process keeps ``kernel_``, ``X_train_``, ``alpha_``, ``L_``, ``_y_train_mean`` and
``_y_train_std``, `LeanGaussianProcess.predict` gives scikit-learn's own numbers, bit for
bit, or defers to it, and a callable ``optimizer`` (`lbfgsb_optimizer`) fits as the default
one does."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, Matern

from study.adapters.sklearn_internals import LeanGaussianProcess, lbfgsb_optimizer, lean


def _fitted(process: GaussianProcessRegressor, seed: int, features: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 0, size=(9, features))
    y = np.sin(3 * x).sum(axis=1) + rng.normal(0, 0.1, 9)
    return process.fit(x, y)


def _kt_like(seed: int = 0, kernel=None) -> GaussianProcessRegressor:
    """The process KerasTuner's Bayesian oracle makes."""
    return GaussianProcessRegressor(
        kernel=kernel or Matern(nu=2.5),
        n_restarts_optimizer=20,
        normalize_y=True,
        alpha=1e-4,
        random_state=seed,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("features", [1, 3])
def test_lean_predictions_are_scikit_learns_bit_for_bit(seed: int, features: int) -> None:
    own = _fitted(_kt_like(seed), seed, features)
    ours = _fitted(lean(_kt_like(seed)), seed, features)
    points = np.random.default_rng(seed + 10).uniform(-4, 1, size=(25, features))
    for point in points:
        x = point.reshape(1, -1)
        mean, std = ours.predict(x, return_std=True)
        expected_mean, expected_std = own.predict(x, return_std=True)
        assert mean.tobytes() == expected_mean.tobytes()
        assert std.tobytes() == expected_std.tobytes()
    batch = ours.predict(points, return_std=True)
    expected = own.predict(points, return_std=True)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(batch, expected, strict=True))


def test_other_inputs_and_requests_go_to_scikit_learn() -> None:
    own = _fitted(_kt_like(kernel=RBF()), 0)
    ours = _fitted(lean(_kt_like(kernel=RBF())), 0)
    as_list = [[-1.0], [-2.0]]
    np.testing.assert_array_equal(
        ours.predict(as_list, return_std=True)[1], own.predict(as_list, return_std=True)[1]
    )
    np.testing.assert_array_equal(ours.predict(np.array([[-1.0]])), own.predict([[-1.0]]))
    cov = ours.predict(np.array([[-1.0], [0.5]]), return_cov=True)[1]
    np.testing.assert_array_equal(cov, own.predict([[-1.0], [0.5]], return_cov=True)[1])
    with pytest.raises(ValueError, match=r"NaN|infinity"):  # validation still applies
        ours.predict(np.array([[np.nan]]), return_std=True)
    with pytest.raises(ValueError):  # the wrong number of features, as scikit-learn says
        ours.predict(np.array([[1.0, 2.0]]), return_std=True)


def test_an_unfitted_process_predicts_the_prior() -> None:
    mean, std = LeanGaussianProcess(kernel=RBF()).predict(np.array([[0.0]]), return_std=True)
    assert float(mean) == 0.0 and std.tolist() == [1.0]


def test_lean_keeps_the_parameters() -> None:
    process = _kt_like(seed=7)
    made = lean(process)
    assert isinstance(made, LeanGaussianProcess)
    params, given = made.get_params(deep=False), process.get_params(deep=False)
    assert params.keys() == given.keys()
    assert made.random_state == 7 and made.n_restarts_optimizer == 20 and made.normalize_y
    assert params.pop("optimizer") is lbfgsb_optimizer and given.pop("optimizer") == "fmin_l_bfgs_b"
    assert {k: v for k, v in params.items() if k != "kernel"} == {
        k: v for k, v in given.items() if k != "kernel"
    }


def test_a_chosen_optimizer_is_kept() -> None:
    process = _kt_like()
    process.set_params(optimizer=None)
    assert lean(process).optimizer is None


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("features", [1, 3])
def test_the_lean_fit_is_scikit_learns_bit_for_bit(seed: int, features: int) -> None:
    """21 descents of the log-marginal likelihood (KerasTuner's restarts) through `lbfgsb`: the
    same hyperparameters, likelihood and predictions as ``minimize``'s."""
    own = _fitted(_kt_like(seed), seed, features)
    ours = _fitted(lean(_kt_like(seed)), seed, features)
    assert ours.kernel_.theta.tobytes() == own.kernel_.theta.tobytes()
    assert ours.log_marginal_likelihood_value_ == own.log_marginal_likelihood_value_
    assert ours.alpha_.tobytes() == own.alpha_.tobytes()
