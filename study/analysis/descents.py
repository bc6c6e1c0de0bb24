"""The fit's descents: L-BFGS-B from each starting point, here or, when a helper is installed,
some of them in a process of its own.

A fit of the model of every trial (`study.analysis.surrogate`) runs six or seven descents from
different starting points and keeps the best. They do not depend on each other, so a study
that trains one trial at a time, whose trainer idles while a decision's fit runs, hands half of
them to a helper process on the machine's other core (`study.runner.fit_helper`, installed with
`install`). Each descent is the same computation wherever it runs, on the same arrays, so the
descents and the fit they give are the same, bit for bit.

With normal noise the objective is compiled (`study.analysis.compiled_likelihood`, about 12x
faster than numpy's on a study's few hundred numbers); a Student-t fit, or a machine where numba
cannot compile, runs numpy's.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from types import ModuleType

import numpy as np
from scipy import optimize

from study.adapters.scipy_internals import lbfgsb
from study.analysis.fitting import value_and_gradient
from study.analysis.likelihood import Trials, capped_log_likelihoods
from study.analysis.parameters import Param

__all__ = ["Bounds", "Descents", "descend", "install", "run", "warm_soon"]

#: Each parameter's ``(low, high)``, in `study.analysis.parameters.Param` order.
Bounds = Sequence[tuple[float, float]]
#: Runs the descents of ``starts`` within the bounds and returns their results in order.
Descents = Callable[[Trials, Bounds, Sequence[np.ndarray]], list[optimize.OptimizeResult]]

LOG = logging.getLogger(__name__)

_installed: Descents | None = None


def descend(
    data: Trials, bounds: Bounds, starts: Sequence[np.ndarray]
) -> list[optimize.OptimizeResult]:
    """L-BFGS-B on the trials' negative log-likelihood (with the rate cap) from each of
    ``starts`` (clipped into ``bounds``), here: the results in the order of ``starts``. With
    normal noise (the tail held at 0) the objective is `study.analysis.compiled_likelihood`'s."""
    lower = np.array([lo for lo, _ in bounds])
    upper = np.array([hi for _, hi in bounds])
    objective = _objective(data, bounds, upper)
    return [lbfgsb(objective, np.clip(x0, lower, upper), bounds) for x0 in starts]


def _objective(
    data: Trials, bounds: Bounds, upper: np.ndarray
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The negative capped log-likelihood and its gradient: compiled with normal noise (the
    tail held at 0), numpy's otherwise or where numba cannot run."""
    kernel = _kernel() if tuple(bounds[Param.TAIL]) == (0.0, 0.0) else None
    if kernel is not None:
        arrays = kernel.kernel_data(data)
        return lambda t: kernel.objective(t, upper, arrays)
    return lambda t: value_and_gradient(lambda p: -capped_log_likelihoods(p, data), t, upper)


@functools.cache
def _kernel() -> ModuleType | None:
    """`study.analysis.compiled_likelihood`, compiled or loaded from numba's cache; None (the
    fits then run numpy's likelihood) where numba cannot compile here."""
    try:
        from study.analysis import compiled_likelihood

        compiled_likelihood.warm()
    except Exception as exc:
        LOG.warning("the fits run numpy's likelihood: numba could not compile it (%s)", exc)
        return None
    return compiled_likelihood


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


def warm_soon() -> threading.Thread:
    """Compile (or load from numba's cache) the compiled likelihood in a thread of its own, so
    that a study's first fit does not wait for it; the thread, started."""
    thread = threading.Thread(target=_kernel, name="study-warm-likelihood", daemon=True)
    thread.start()
    return thread
