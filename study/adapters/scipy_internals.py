"""SciPy's private names `study` uses: the L-BFGS-B routine under `scipy.optimize.minimize`.

A fit of the model of every trial runs about a thousand evaluations of a compiled objective
(`study.analysis.compiled_likelihood`, ~15 us each), and ``minimize``'s wrappers around each
evaluation (its scalar function, memoised gradient and checks) cost about twice that again.
`lbfgsb` drives ``scipy.optimize._lbfgsb.setulb`` (SciPy 1.15's C routine) with the loop of
``scipy.optimize._lbfgsb_py._minimize_lbfgsb`` and ``minimize``'s default options, so it visits
the same points and returns the same optimum, bit for bit, without those wrappers.

Checked at SciPy 1.15 through 1.17; the contract test is
``tests/adapters/test_scipy_internals.py``. Fallback: where ``setulb`` is not the routine this
loop drives (another SciPy), `lbfgsb` is ``scipy.optimize.minimize(..., method="L-BFGS-B")``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
from scipy import optimize

__all__ = ["lbfgsb"]

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
