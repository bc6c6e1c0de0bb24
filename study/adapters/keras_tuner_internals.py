"""KerasTuner's private names `study` uses: an oracle's trial saving, its Gaussian process and
Hyperband's brackets.

Checked at KerasTuner 1.4.2 (the oldest ``pyproject.toml`` allows: the first whose public
``keras_tuner.engine.trial`` exists) through 1.4.8; the contract test is
``tests/adapters/test_keras_tuner_internals.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from keras_tuner.engine.trial import Trial, TrialStatus

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
    re-validating each point (`study.adapters.sklearn_internals.LeanGaussianProcess`: the same
    numbers; a draw 1.6-1.8x faster). Uses ``BayesianOptimizationOracle._make_gpr``
    (called by ``__init__`` and ``set_state``). Fallback: should KerasTuner rename it, the
    oracle keeps scikit-learn's own process (the contract test catches it)."""

    def _make_gpr(self) -> Any:
        return lean(super()._make_gpr())  # type: ignore[misc]


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
