"""KerasTuner's private names `study` uses: an oracle's trial saving, its Gaussian process, its
acquisition's optimiser and Hyperband's brackets.

Checked at KerasTuner 1.4.2 (the oldest ``pyproject.toml`` allows: the first whose public
``keras_tuner.engine.trial`` exists) through 1.4.8; the contract test is
``tests/adapters/test_keras_tuner_internals.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
import scipy
from keras_tuner.engine.trial import Trial, TrialStatus
from keras_tuner.oracles import BayesianOptimizationOracle
from scipy import optimize

from study.adapters.scipy_internals import lbfgsb_numeric
from study.adapters.sklearn_internals import lean

__all__ = [
    "LeanGaussianProcess",
    "Trial",
    "TrialStatus",
    "Unsaved",
    "hyperband_brackets",
    "hyperband_iteration",
    "set_hyperband_state",
]


class Unsaved:
    """Mixin for a KerasTuner oracle that writes no file: ``save`` (public) and
    ``_save_trial`` (private: what ``Oracle.update_trial`` and ``Oracle.end_trial`` call to
    write ``trial.json``) do nothing. Fallback: none; should KerasTuner rename ``_save_trial``,
    its oracles would write trial files again, which the contract test catches."""

    def save(self) -> None:
        """Nothing to save."""

    def _save_trial(self, trial: Trial) -> None:
        """Nothing to save."""


class LeanGaussianProcess:
    """Mixin for a Bayesian-optimisation oracle whose Gaussian process predicts without
    re-validating each point and fits through `study.adapters.scipy_internals.lbfgsb`
    (`study.adapters.sklearn_internals.lean`), and whose acquisition's descents run
    `study.adapters.scipy_internals.lbfgsb_numeric` (`lean_acquisition`): KerasTuner's
    proposals, bit for bit, in about 0.6x the time. Uses
    ``BayesianOptimizationOracle._make_gpr`` (called by ``__init__`` and ``set_state``).
    Fallback: should KerasTuner rename it, the oracle keeps scikit-learn's own process and
    SciPy's ``minimize`` (the contract test catches it)."""

    def _make_gpr(self) -> Any:
        lean_acquisition()
        return lean(super()._make_gpr())  # type: ignore[misc]


class _LeanOptimize:
    """``scipy.optimize`` as KerasTuner's Bayesian module sees it: ``minimize`` with L-BFGS-B,
    bounds and no gradient (the acquisition's call) is `lbfgsb_numeric`; any other call, and
    every other name, is SciPy's own."""

    def __getattr__(self, name: str) -> Any:
        return getattr(optimize, name)

    @staticmethod
    def minimize(
        fun: Any, x0: Any, args: tuple = (), method: Any = None, jac: Any = None,
        bounds: Any = None, **options: Any,
    ) -> optimize.OptimizeResult:  # fmt: skip
        if method == "L-BFGS-B" and jac is None and bounds is not None and not args and not options:
            limits = [(float(lo), float(hi)) for lo, hi in np.asarray(bounds, dtype=np.float64)]
            return lbfgsb_numeric(fun, np.asarray(x0, dtype=np.float64).ravel(), limits)
        return optimize.minimize(
            fun, x0, args=args, method=method, jac=jac, bounds=bounds, **options
        )


class _LeanScipy:
    """The ``scipy`` module with `_LeanOptimize` as its ``optimize``."""

    optimize = _LeanOptimize()

    def __getattr__(self, name: str) -> Any:
        return getattr(scipy, name)


def lean_acquisition() -> bool:
    """Have KerasTuner's Bayesian module (where ``BayesianOptimizationOracle`` is defined)
    reach SciPy through `_LeanScipy`: its ``populate_space`` minimises the acquisition with
    ``scipy.optimize.minimize``, looked up in the module's ``scipy`` at each call. Whether the
    module runs it (False: a KerasTuner whose module holds no ``scipy``, left as it is)."""
    module: ModuleType | None = sys.modules.get(BayesianOptimizationOracle.__module__)
    found = getattr(module, "scipy", None)
    if isinstance(found, _LeanScipy):
        return True
    if found is not scipy:
        return False
    module.scipy = _LeanScipy()  # type: ignore[union-attr]
    return True


def hyperband_brackets(oracle: Any) -> list[dict[str, Any]]:
    """A Hyperband oracle's brackets: dicts with ``bracket_num``, ``rounds`` (lists of
    ``{"id", "past_id"}`` per round) and, where set, ``iteration``.

    Uses ``HyperbandOracle._brackets``. No fallback (an AttributeError names it)."""
    return list(oracle._brackets)


def hyperband_iteration(oracle: Any) -> int:
    """A Hyperband oracle's current iteration. Uses ``HyperbandOracle._current_iteration``."""
    return int(oracle._current_iteration)


def set_hyperband_state(
    oracle: Any, brackets: Sequence[dict[str, Any]], iteration: int, bracket: int
) -> None:
    """Set a Hyperband oracle's bracket bookkeeping: its brackets (as `hyperband_brackets`
    reads them), current iteration and current bracket.

    KerasTuner keeps them as ``_brackets``, ``_current_iteration`` and ``_current_bracket``
    with no public setter besides ``set_state`` from its own files; this writes them."""
    oracle._brackets = list(brackets)
    oracle._current_iteration, oracle._current_bracket = iteration, bracket
