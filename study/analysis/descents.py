"""The fit's descents: L-BFGS-B from each starting point, here or, when a helper is installed,
some of them in a process of its own.

A fit of the model of every trial (`study.analysis.surrogate`) runs six or seven descents from
different starting points and keeps the best. They do not depend on each other, so a study
that trains one trial at a time, whose trainer idles while a decision's fit runs, hands half of
them to a helper process on the machine's other core (`study.runner.fit_helper`, installed with
`install`). Each descent is the same computation wherever it runs, on the same arrays, so the
descents and the fit they give are the same, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import optimize

from study.analysis.fitting import value_and_gradient
from study.analysis.likelihood import Trials, capped_log_likelihoods

__all__ = ["Bounds", "Descents", "descend", "install", "run"]

#: Each parameter's ``(low, high)``, in `study.analysis.parameters.Param` order.
Bounds = Sequence[tuple[float, float]]
#: Runs the descents of ``starts`` within the bounds and returns their results in order.
Descents = Callable[[Trials, Bounds, Sequence[np.ndarray]], list[optimize.OptimizeResult]]

_installed: Descents | None = None


def descend(
    data: Trials, bounds: Bounds, starts: Sequence[np.ndarray]
) -> list[optimize.OptimizeResult]:
    """L-BFGS-B on the trials' negative log-likelihood (with the rate cap) from each of
    ``starts`` (clipped into ``bounds``), here: the results in the order of ``starts``."""
    lower = np.array([lo for lo, _ in bounds])
    upper = np.array([hi for _, hi in bounds])

    def objective(t: np.ndarray) -> tuple[float, np.ndarray]:
        return value_and_gradient(lambda p: -capped_log_likelihoods(p, data), t, upper)

    return [
        optimize.minimize(
            objective, np.clip(x0, lower, upper), jac=True, method="L-BFGS-B", bounds=bounds
        )
        for x0 in starts
    ]


def run(
    data: Trials, bounds: Bounds, starts: Sequence[np.ndarray]
) -> list[optimize.OptimizeResult]:
    """`descend`, through the installed helper when there is one and more than one start."""
    helper = _installed
    if helper is None or len(starts) < 2:
        return descend(data, bounds, starts)
    return helper(data, bounds, starts)


def install(helper: Descents | None) -> Descents | None:
    """Run the descents through ``helper`` from now on (None: here again); the one before."""
    global _installed
    before, _installed = _installed, helper
    return before
