"""`study.adapters.keras_tuner_internals` against the installed KerasTuner: ``Oracle`` saves a
trial through ``_save_trial``, ``HyperbandOracle`` keeps its brackets, current bracket and
iteration in ``_brackets``, ``_current_bracket`` and ``_current_iteration``, shaped as used, and
``BayesianOptimizationOracle`` makes its process in ``_make_gpr`` and reaches
``scipy.optimize.minimize`` through its module's ``scipy``."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import keras_tuner
import numpy as np
import pytest
import scipy
from scipy import optimize

from study.adapters.keras_tuner_internals import (
    LeanGaussianProcess,
    Trial,
    TrialStatus,
    Unsaved,
    hyperband_brackets,
    hyperband_iteration,
    lean_acquisition,
    set_hyperband_state,
)

OBJECTIVE = keras_tuner.Objective("score", direction="min")


class _Random(Unsaved, keras_tuner.oracles.RandomSearchOracle):
    pass


class _Hyperband(Unsaved, keras_tuner.oracles.HyperbandOracle):
    pass


def _space() -> keras_tuner.HyperParameters:
    hp = keras_tuner.HyperParameters()
    hp.Float("learning_rate", 1e-3, 1e-1, sampling="log")
    return hp


def _hyperband() -> _Hyperband:
    return _Hyperband(
        objective=OBJECTIVE, max_epochs=9, factor=3, hyperband_iterations=10, seed=1,
        hyperparameters=_space(),
    )  # fmt: skip


def test_the_public_trial_names_are_the_engines() -> None:
    statuses = (TrialStatus.RUNNING, TrialStatus.COMPLETED, TrialStatus.FAILED)
    assert statuses == ("RUNNING", "COMPLETED", "FAILED")
    assert Trial.__module__.startswith("keras_tuner")


def test_an_unsaved_oracle_ends_trials_without_writing_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "_save_trial" in vars(keras_tuner.Oracle)  # the hook `Unsaved` replaces
    monkeypatch.chdir(tmp_path)
    oracle = _Random(objective=OBJECTIVE, max_trials=5, seed=1, hyperparameters=_space())
    trial = oracle.create_trial("t")
    assert trial.status == TrialStatus.RUNNING
    oracle.update_trial(trial.trial_id, {"score": 0.5})
    trial.status = TrialStatus.COMPLETED
    oracle.end_trial(trial)
    assert oracle.get_best_trials(1)[0].trial_id == trial.trial_id
    assert list(tmp_path.iterdir()) == []


def test_hyperband_brackets_read_and_restored_place_the_next_trial_alike() -> None:
    first = _hyperband()
    assert hasattr(first, "_current_bracket")
    trial = first.create_trial("t")
    brackets = hyperband_brackets(first)
    bracket = brackets[-1]
    assert isinstance(bracket["bracket_num"], int)
    assert bracket["rounds"][0] == [{"past_id": None, "id": trial.trial_id}]
    iteration = hyperband_iteration(first)
    second = _hyperband()
    set_hyperband_state(second, brackets, iteration, bracket["bracket_num"])
    assert hyperband_brackets(second) == brackets
    assert hyperband_iteration(second) == iteration
    following = second.create_trial("t")
    assert [x["id"] for x in hyperband_brackets(second)[-1]["rounds"][0]] == [
        trial.trial_id,
        following.trial_id,
    ]


class _Bayesian(Unsaved, keras_tuner.oracles.BayesianOptimizationOracle):
    pass


class _LeanBayesian(Unsaved, LeanGaussianProcess, keras_tuner.oracles.BayesianOptimizationOracle):
    pass


def _space_2d() -> keras_tuner.HyperParameters:
    hp = _space()
    hp.Float("dropout", 0.0, 0.5)
    return hp


def _proposals(oracle_class: type, space=_space) -> tuple[list[list[float]], object]:
    """Ten trials of a Bayesian oracle on a bowl in log rate (and dropout): what it proposed."""
    oracle = oracle_class(
        objective=OBJECTIVE, hyperparameters=space(), max_trials=50, seed=3, num_initial_points=3
    )
    oracle.verbose = 0
    proposed = []
    for _ in range(10):
        trial = oracle.create_trial("t")
        values = trial.hyperparameters.values
        proposed.append(list(values.values()))
        score = math.log(values["learning_rate"] / 0.01) ** 2 + (values.get("dropout", 0.2) - 0.2)
        oracle.update_trial(trial.trial_id, {"score": score})
        trial.status = TrialStatus.COMPLETED
        oracle.end_trial(trial)
    return proposed, oracle.gpr


def _bayesian_module():
    return sys.modules[keras_tuner.oracles.BayesianOptimizationOracle.__module__]


@pytest.mark.parametrize("space", [_space, _space_2d])
def test_the_lean_oracle_proposes_what_kerastuner_does(
    space, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BayesianOptimizationOracle._make_gpr`` makes the process that the oracle fits and
    asks, and its acquisition is minimised with its module's ``scipy.optimize.minimize``; the
    lean process and descents give the same proposals, bit for bit."""
    monkeypatch.setattr(_bayesian_module(), "scipy", scipy)  # KerasTuner as installed
    own, own_process = _proposals(_Bayesian, space)
    assert _bayesian_module().scipy is scipy
    lean, lean_process = _proposals(_LeanBayesian, space)
    assert type(_bayesian_module().scipy).__name__ == "_LeanScipy"
    assert type(lean_process).__name__ == "LeanGaussianProcess"
    assert type(own_process).__name__ == "GaussianProcessRegressor"
    assert lean == own


def test_the_lean_scipy_runs_only_the_acquisitions_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_bayesian_module(), "scipy", scipy)
    assert lean_acquisition() and lean_acquisition()  # installed once, then found
    lean = _bayesian_module().scipy
    assert lean.optimize.rosen is optimize.rosen and lean.stats is scipy.stats

    def bowl(x: np.ndarray) -> np.ndarray:
        return np.array([((x - 0.3) ** 2).sum()])

    ours = lean.optimize.minimize(
        bowl, x0=np.array([0.9, 0.1]), bounds=[(0, 1)] * 2, method="L-BFGS-B"
    )
    theirs = optimize.minimize(
        bowl, x0=np.array([0.9, 0.1]), bounds=[(0, 1)] * 2, method="L-BFGS-B"
    )
    assert np.array_equal(ours.x, theirs.x) and ours.fun == theirs.fun
    other = lean.optimize.minimize(bowl, x0=np.array([0.9, 0.1]), method="Nelder-Mead")
    assert (
        other.message
        == optimize.minimize(bowl, x0=np.array([0.9, 0.1]), method="Nelder-Mead").message
    )


def test_a_module_without_scipy_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(_bayesian_module(), "scipy")
    assert lean_acquisition() is False
    assert not hasattr(_bayesian_module(), "scipy")
