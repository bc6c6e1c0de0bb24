"""SciPy's private names `study` uses: the L-BFGS-B routine under `scipy.optimize.minimize`.

A fit of the model of every trial runs about a thousand evaluations of a compiled objective
(`study.analysis.compiled_likelihood`, ~15 us each), and ``minimize``'s wrappers around each
evaluation (its scalar function, memoised gradient and checks) cost about twice that again.
`lbfgsb` drives ``scipy.optimize._lbfgsb.setulb`` (SciPy 1.15's C routine) with the loop of
``scipy.optimize._lbfgsb_py._minimize_lbfgsb`` and ``minimize``'s default options, so it visits
the same points and returns the same optimum, bit for bit, without those wrappers.

`lbfgsb_numeric` is the same loop for an objective without a gradient: ``minimize``'s forward
difference (``scipy.optimize._numdiff.approx_derivative``, ``method="2-point"``, L-BFGS-B's
absolute step ``eps=1e-8``, the step turned or shortened at a bound) computed in place of its
scalar function's machinery, which costs several times the few-microsecond objectives it wraps
(KerasTuner's acquisition: `study.adapters.keras_tuner_internals`).

Checked at SciPy 1.15 through 1.17; the contract test is
``tests/adapters/test_scipy_internals.py``. Fallback: where ``setulb`` is not the routine this
loop drives (another SciPy), `lbfgsb` and `lbfgsb_numeric` are
``scipy.optimize.minimize(..., method="L-BFGS-B")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import optimize

__all__ = ["lbfgsb", "lbfgsb_numeric"]

Objective = Callable[[np.ndarray], tuple[float, np.ndarray]]

#: ``minimize(method="L-BFGS-B")``'s defaults: history, ftol, gtol, line-search steps and limits.
_MAXCOR, _FTOL, _GTOL, _MAXLS, _MAXITER, _MAXFUN = (
    10,
    2.220446049250313e-09,
    1e-05,
    20,
    15000,
    15000,
)
#: L-BFGS-B's default absolute step of its forward difference (``minimize``'s ``eps``).
_EPS_STEP = 1e-8
#: The relative step ``approx_derivative`` takes where ``x + eps`` rounds back to ``x``.
_REL_STEP = float(np.finfo(np.float64).eps ** 0.5)
#: ``setulb``'s ``task`` codes: evaluate f and g at x; a new iteration; converged.
_FG, _NEW_X, _CONVERGED = 3, 1, 4
#: The arguments of SciPy 1.15's C ``setulb`` (its docstring's signature).
_SIGNATURE = "setulb(m,x,l,u,nbd,f,g,factr,pgtol,wa,iwa,task,lsave,isave,dsave,maxls,ln_task)"


@functools.cache
def _setulb() -> Callable[..., None] | None:
    try:
        from scipy.optimize import _lbfgsb
    except ImportError:
        return None
    routine = getattr(_lbfgsb, "setulb", None)
    doc = (getattr(routine, "__doc__", None) or "").strip().splitlines()
    return routine if doc and doc[0].replace(" ", "") == _SIGNATURE else None


def lbfgsb(
    objective: Objective, x0: np.ndarray, bounds: Sequence[tuple[float, float]]
) -> optimize.OptimizeResult:
    """L-BFGS-B from ``x0`` (clipped into ``bounds``, all finite) on ``objective``, which returns
    the value and gradient at a point: ``minimize(objective, x0, jac=True,
    method="L-BFGS-B", bounds=bounds)``'s ``x``, ``fun``, ``nfev``, ``nit`` and ``success``."""
    setulb = _setulb()
    lower = np.array([lo for lo, _ in bounds], dtype=np.float64)
    upper = np.array([hi for _, hi in bounds], dtype=np.float64)
    if setulb is None or not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        return optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
    x = np.clip(np.asarray(x0, dtype=np.float64).ravel(), lower, upper)
    n, m = x.size, _MAXCOR
    f, g = np.array(0.0), np.zeros(n)
    nbd = np.full(n, 2, np.int32)  # bounded below and above
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m)
    iwa = np.zeros(3 * n, np.int32)
    task, ln_task = np.zeros(2, np.int32), np.zeros(2, np.int32)
    lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
    factr = _FTOL / np.finfo(float).eps
    nfev = nit = 0
    while True:
        g = g.astype(np.float64)
        setulb(m, x, lower, upper, nbd, f, g, factr, _GTOL, wa, iwa, task, lsave, isave, dsave,
               _MAXLS, ln_task)  # fmt: skip
        if task[0] == _FG:
            f, g = objective(x.copy())
            nfev += 1
        elif task[0] == _NEW_X:
            nit += 1
            if nit >= _MAXITER or nfev > _MAXFUN:
                task[0] = 5  # stop: the limits of `minimize`
        else:
            break
    return optimize.OptimizeResult(
        x=x, fun=float(f), nfev=nfev, nit=nit, success=bool(task[0] == _CONVERGED)
    )


def lbfgsb_numeric(
    fun: Callable[[np.ndarray], Any], x0: np.ndarray, bounds: Sequence[tuple[float, float]]
) -> optimize.OptimizeResult:
    """``minimize(fun, x0, method="L-BFGS-B", bounds=bounds)`` for a ``fun`` that returns a
    scalar (or a one-element array): `lbfgsb` on the value and ``minimize``'s forward-difference
    gradient (see the module), bit for bit. ``nfev`` counts the points where the gradient was
    asked for, not the difference's evaluations."""
    lower = np.array([lo for lo, _ in bounds], dtype=np.float64)
    upper = np.array([hi for _, hi in bounds], dtype=np.float64)
    if _setulb() is None or not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        return optimize.minimize(fun, x0, method="L-BFGS-B", bounds=bounds)

    def value(x: np.ndarray) -> float:
        fx = fun(np.copy(x))
        return fx if np.isscalar(fx) else np.asarray(fx).item()

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        f = value(x)
        steps = np.diag(_forward_steps(x, lower, upper))
        gradient = np.empty(x.size)
        for i, step in enumerate(steps):
            moved = x + step
            gradient[i] = (value(moved) - f) / (moved[i] - x[i])
        return f, gradient

    return lbfgsb(objective, x0, bounds)


def _forward_steps(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``approx_derivative``'s forward steps at ``x`` (absolute step `_EPS_STEP`; a relative one
    where it vanishes), turned back where a step would leave the bounds and fits the other way,
    else cut to the farther bound."""
    sign = (x >= 0).astype(float) * 2 - 1
    step = np.where(
        (x + _EPS_STEP) - x == 0, _REL_STEP * sign * np.maximum(1.0, np.abs(x)), _EPS_STEP
    )
    below, above = x - lower, upper - x
    moved = x + step
    fitting = np.abs(step) <= np.maximum(below, above)
    step[((moved < lower) | (moved > upper)) & fitting] *= -1
    forward = (above >= below) & ~fitting
    step[forward] = above[forward]
    backward = (above < below) & ~fitting
    step[backward] = -below[backward]
    return step
