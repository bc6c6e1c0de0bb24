"""scikit-learn's private names `study` uses: a fitted Gaussian process's posterior.

KerasTuner's Bayesian oracle picks each proposal by minimising its acquisition from 50 starts,
about 450 calls of ``GaussianProcessRegressor.predict(x, return_std=True)`` on one point per
draw. Each call validates its input (``validate_data``: dtype, shape, finiteness, dataframe
checks), which takes most of the call's time. `LeanGaussianProcess.predict` skips that check
for an input that already is what it would make (a finite float64 array of the fitted number of
features) and computes the posterior mean and standard deviation as
``GaussianProcessRegressor.predict`` does, bit for bit, from its fitted attributes
(``kernel_``, ``X_train_``, ``alpha_``, ``L_``, ``_y_train_mean``, ``_y_train_std``) and the
module's ``GPR_CHOLESKY_LOWER``, its triangular solve the LAPACK call ``solve_triangular``
makes (``dtrtrs``) without that function's checks.

Its fit restarts its hyperparameters' optimiser 21 times per draw, each a
``scipy.optimize.minimize(..., method="L-BFGS-B", jac=True)``: `lean` hands it
`study.adapters.scipy_internals.lbfgsb` (the same optimum, bit for bit, without ``minimize``'s
wrappers) through the process's public ``optimizer`` parameter, where it is the default.

Checked at scikit-learn 1.3 through 1.9; the contract test is
``tests/adapters/test_sklearn_internals.py``. Fallback: any other input, an unfitted process,
``return_cov``, or a scikit-learn without those names calls the parent's ``predict``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy.linalg import lapack, solve_triangular
from sklearn.gaussian_process import GaussianProcessRegressor, _gpr

from study.adapters.scipy_internals import lbfgsb

__all__ = ["LeanGaussianProcess", "lbfgsb_optimizer", "lean"]

_FITTED = ("kernel_", "X_train_", "alpha_", "L_", "_y_train_mean", "_y_train_std")
_LOWER = getattr(_gpr, "GPR_CHOLESKY_LOWER", None)
#: ``GaussianProcessRegressor``'s default ``optimizer``: L-BFGS-B through ``minimize``.
_DEFAULT_OPTIMIZER = "fmin_l_bfgs_b"


class LeanGaussianProcess(GaussianProcessRegressor):
    """`GaussianProcessRegressor` whose ``predict(X, return_std=True)`` skips re-validating an
    input that needs nothing (see the module)."""

    def predict(self, X: Any, return_std: bool = False, return_cov: bool = False) -> Any:
        if not (return_std and not return_cov and self._lean_input(X)):
            return super().predict(X, return_std=return_std, return_cov=return_cov)
        K_trans = self.kernel_(X, self.X_train_)
        y_mean = K_trans @ self.alpha_
        y_mean = self._y_train_std * y_mean + self._y_train_mean
        if y_mean.ndim > 1 and y_mean.shape[1] == 1:
            y_mean = np.squeeze(y_mean, axis=1)
        V = _solve_triangular(self.L_, K_trans.T, lower=bool(_LOWER))
        y_var = self.kernel_.diag(X).copy()
        y_var -= np.einsum("ij,ji->i", V.T, V)
        y_var_negative = y_var < 0
        if np.any(y_var_negative):
            warnings.warn(
                "Predicted variances smaller than 0. Setting those variances to 0.", stacklevel=2
            )
            y_var[y_var_negative] = 0.0
        y_var = np.outer(y_var, self._y_train_std**2).reshape(*y_var.shape, -1)
        if y_var.shape[1] == 1:
            y_var = np.squeeze(y_var, axis=1)
        return y_mean, np.sqrt(y_var)

    def _lean_input(self, X: Any) -> bool:
        """``X`` is what validation would return unchanged, and the process is fitted."""
        return (
            _LOWER is not None
            and all(hasattr(self, name) for name in _FITTED)
            and type(X) is np.ndarray
            and X.dtype == np.float64
            and X.ndim == 2
            and X.shape[1] == getattr(self, "n_features_in_", -1)
            and bool(np.isfinite(X).all())
        )


def _solve_triangular(a: np.ndarray, b: np.ndarray, *, lower: bool) -> np.ndarray:
    """``scipy.linalg.solve_triangular(a, b, lower=lower, check_finite=False)`` for float64
    arrays, as its LAPACK call (``trtrs``, on ``a`` or its transpose as the routine expects
    Fortran order) without its checks and batching (half of a one-point prediction's time);
    any failure is left to ``solve_triangular`` to report."""
    if a.dtype == np.float64 and b.dtype == np.float64 and a.ndim == 2 and b.ndim == 2:
        if a.flags.f_contiguous:
            x, info = lapack.dtrtrs(a, b, lower=lower, trans=0)
        else:
            x, info = lapack.dtrtrs(a.T, b, lower=not lower, trans=1)
        if info == 0:
            return x
    return solve_triangular(a, b, lower=lower, check_finite=False)


def lean(process: GaussianProcessRegressor) -> LeanGaussianProcess:
    """A `LeanGaussianProcess` with ``process``'s parameters (unfitted, as given), its default
    optimiser (``"fmin_l_bfgs_b"``) run as `lbfgsb_optimizer`."""
    params = process.get_params(deep=False)
    if params.get("optimizer") == _DEFAULT_OPTIMIZER:
        params["optimizer"] = lbfgsb_optimizer
    return LeanGaussianProcess(**params)


def lbfgsb_optimizer(
    obj_func: Any, initial_theta: np.ndarray, bounds: np.ndarray
) -> tuple[np.ndarray, float]:
    """scikit-learn's default optimiser as a callable ``optimizer``: L-BFGS-B on the negative
    log-marginal likelihood and its gradient from ``initial_theta`` within ``bounds``, as
    ``GaussianProcessRegressor._constrained_optimization`` runs ``minimize`` (bit for bit)."""
    result = lbfgsb(
        lambda theta: obj_func(theta, eval_gradient=True),
        np.asarray(initial_theta, dtype=np.float64),
        [(float(lo), float(hi)) for lo, hi in bounds],
    )
    return result.x, result.fun
