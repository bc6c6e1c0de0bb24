"""The parameters' covariance: never narrower than the likelihood's curvature says, wider where
the model misfits, raised for every combination, and a variance for a parameter on a cap only."""

from __future__ import annotations

import math

import numpy as np

from study.analysis import surrogate
from study.analysis.covariance import CAPPED, at_least, is_free, parameter_covariance
from study.analysis.fitting import hessian
from study.analysis.likelihood import PARAMS, Trials, log_likelihoods
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
        correction = data.n / (data.n - len(free))
        return np.sqrt(np.diag(cov)[free]), np.sqrt(np.diag(inverse) * correction), free

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


def test_a_parameter_on_a_bound_has_a_variance_only_on_a_cap():
    knee, alpha = PARAMS.index("log_knee"), PARAMS.index("alpha")
    assert "log_knee" in CAPPED and "alpha" not in CAPPED
    assert is_free(alpha, 0.5, -3.0, 3.0)  # inside
    assert not is_free(alpha, 3.0, -3.0, 3.0)  # on a bound of the model
    assert is_free(knee, math.log(8.0), 0.0, math.log(8.0))  # on its cap: "at least this sharp"
    assert not is_free(knee, 0.0, 0.0, math.log(8.0))  # on McCandlish's q = 1, a bound
    assert not is_free(knee, 0.0, 0.0, 0.0)  # held
