"""One study file translated to Optuna and to KerasTuner gives the same space."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from study.config.space import CategoricalParam, FloatParam, IntParam, SearchSpace
from study.config.study import StudyConfig
from study.config.studyfile import load_study_file
from study.tuners.optuna_space import to_optuna_distributions

keras_tuner = pytest.importorskip("keras_tuner")
from study.tuners.keras_tuner_space import to_hyperparameters  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "search_spaces").glob("*.yaml"))

EVERY_KIND = """\
name: every-kind
workload: mnist1d
target: "val_accuracy>=0.6"
budget: {max_steps: 100}
trials_per_stratum: 2
search_space:
  batch_size: {low: 8, high: 64}
  learning_rate: {low: 1.0e-3, high: 3.0, scale: log}
  strategy: [default, mirrored:2]
  momentum: {low: 0.8, high: 0.99, scale: linear}
  weight_decay: {choices: [0, 1.0e-4, 1.0e-3]}
  warmup_steps: {low: 0, high: 500, scale: linear}
  decay_steps: {low: 10, high: 10000, scale: log}
  end_factor: {choices: [0.0]}
  schedule: {choices: [constant, linear, cosine]}
  optimizer: {choices: [nesterov, adam]}
"""


@pytest.fixture(scope="module")
def every_kind_config(tmp_path_factory: pytest.TempPathFactory) -> StudyConfig:
    path = tmp_path_factory.mktemp("spaces") / "every_kind.yaml"
    path.write_text(EVERY_KIND, encoding="utf-8")
    return load_study_file(path)


@pytest.fixture
def every_kind(every_kind_config: StudyConfig) -> SearchSpace:
    return every_kind_config.space


@pytest.fixture(params=["every_kind", *SHIPPED], ids=lambda p: getattr(p, "name", p))
def config(request: pytest.FixtureRequest, every_kind_config: StudyConfig) -> StudyConfig:
    if request.param == "every_kind":
        return every_kind_config
    return load_study_file(request.param)


@pytest.fixture
def space(config: StudyConfig) -> SearchSpace:
    return config.space


WINDOWS = [None, (0.01, 0.1)]


def describe_optuna(space: SearchSpace, window: tuple[float, float] | None) -> dict[str, tuple]:
    out = {}
    for name, dist in to_optuna_distributions(space, window).items():
        if isinstance(dist, optuna.distributions.FloatDistribution):
            assert dist.step is None
            out[name] = ("float", dist.low, dist.high, dist.log)
        elif isinstance(dist, optuna.distributions.IntDistribution):
            assert dist.step == 1
            out[name] = ("int", dist.low, dist.high, dist.log)
        else:
            assert isinstance(dist, optuna.distributions.CategoricalDistribution)
            out[name] = ("choice", tuple(dist.choices))
    return out


def describe_keras_tuner(
    space: SearchSpace, window: tuple[float, float] | None
) -> dict[str, tuple]:
    out = {}
    for hp in to_hyperparameters(space, window).space:
        if isinstance(hp, keras_tuner.engine.hyperparameters.Float):
            assert hp.step is None
            out[hp.name] = ("float", hp.min_value, hp.max_value, hp.sampling == "log")
        elif isinstance(hp, keras_tuner.engine.hyperparameters.Int):
            assert hp.step in (None, 1)
            out[hp.name] = ("int", hp.min_value, hp.max_value, hp.sampling == "log")
        else:
            assert isinstance(hp, keras_tuner.engine.hyperparameters.Choice)
            out[hp.name] = ("choice", tuple(hp.values))
    return out


def describe_space(space: SearchSpace, window: tuple[float, float] | None) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for p in space.params:
        if isinstance(p, CategoricalParam):
            out[p.name] = ("choice", p.choices)
        else:
            out[p.name] = ("float" if isinstance(p, FloatParam) else "int", p.low, p.high, p.log)
    if window is not None:
        out["learning_rate"] = ("float", *window, out["learning_rate"][3])
    return out


def test_every_kind_is_covered(every_kind: SearchSpace) -> None:
    kinds = {type(p) for p in every_kind.params}
    assert kinds == {FloatParam, IntParam, CategoricalParam}
    assert {p.log for p in every_kind.params if not isinstance(p, CategoricalParam)} == {
        True,
        False,
    }


@pytest.mark.parametrize("window", WINDOWS, ids=["full range", "centred window"])
def test_both_translations_describe_the_same_space(
    space: SearchSpace, window: tuple[float, float] | None
) -> None:
    expected = describe_space(space, window)
    assert describe_optuna(space, window) == expected
    assert describe_keras_tuner(space, window) == expected
    assert next(iter(describe_keras_tuner(space, window))) == "learning_rate"
    assert list(describe_optuna(space, window)) == list(describe_keras_tuner(space, window))


def in_space(space: SearchSpace, name: str, value: Any) -> bool:
    param = space.param(name)
    if isinstance(param, IntParam) and not isinstance(value, int):
        return False
    return param.contains(value)


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_optuna_samples_stay_in_bounds(config: StudyConfig, sampler: str) -> None:
    space = config.space
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    samplers = {
        "random": optuna.samplers.RandomSampler(seed=0),
        "tpe": optuna.samplers.TPESampler(seed=0, n_startup_trials=5),
    }
    study = optuna.create_study(sampler=samplers[sampler])
    distributions = to_optuna_distributions(space)
    for i in range(20):
        trial = study.ask(distributions)
        assert set(trial.params) == set(distributions)
        for name, value in trial.params.items():
            assert in_space(space, name, value), (name, value)
        spec = config.trial_spec(config.strata[i % len(config.strata)], trial.params)
        assert spec.learning_rate == trial.params["learning_rate"]
        study.tell(trial, float(i % 7))


def test_keras_tuner_samples_stay_in_bounds(config: StudyConfig) -> None:
    space = config.space
    hps = to_hyperparameters(space)
    for seed in range(30):
        values = {hp.name: hp.random_sample(seed * 100 + i) for i, hp in enumerate(hps.space)}
        for name, value in values.items():
            assert in_space(space, name, value), (name, value)
        spec = config.trial_spec(config.strata[seed % len(config.strata)], values)
        assert spec.learning_rate == values["learning_rate"]
    for name, value in hps.values.items():  # defaults, too
        assert in_space(space, name, value), (name, value)
