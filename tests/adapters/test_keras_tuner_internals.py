"""`study.adapters.keras_tuner_internals` against the installed KerasTuner: ``Oracle`` saves a
trial through ``_save_trial``, and ``HyperbandOracle`` keeps its brackets, current bracket and
iteration in ``_brackets``, ``_current_bracket`` and ``_current_iteration``, shaped as used."""

from __future__ import annotations

from pathlib import Path

import keras_tuner
import pytest

from study.adapters.keras_tuner_internals import (
    LeanGaussianProcess,
    Trial,
    TrialStatus,
    Unsaved,
    hyperband_brackets,
    hyperband_iteration,
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


def _proposals(oracle_class: type) -> tuple[list[float], object]:
    """Ten trials of a Bayesian oracle on a bowl in log rate: the rates it proposed."""
    import math

    oracle = oracle_class(
        objective=OBJECTIVE, hyperparameters=_space(), max_trials=50, seed=3, num_initial_points=3
    )
    oracle.verbose = 0
    rates = []
    for _ in range(10):
        trial = oracle.create_trial("t")
        rate = trial.hyperparameters.get("learning_rate")
        rates.append(rate)
        oracle.update_trial(trial.trial_id, {"score": (math.log(rate / 0.01)) ** 2})
        trial.status = TrialStatus.COMPLETED
        oracle.end_trial(trial)
    return rates, oracle.gpr


def test_the_lean_gaussian_process_proposes_what_kerastuner_does() -> None:
    """``BayesianOptimizationOracle._make_gpr`` makes the process that the oracle fits and
    asks; the lean one gives the same proposals."""
    own, own_process = _proposals(_Bayesian)
    lean, lean_process = _proposals(_LeanBayesian)
    assert type(lean_process).__name__ == "LeanGaussianProcess"
    assert type(own_process).__name__ == "GaussianProcessRegressor"
    assert lean == own
