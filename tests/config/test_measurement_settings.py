"""The study file's ``noise_scale`` and ``exact_steps``: defaults, every trial of the study gets
them, the schema accepts them, the fingerprint counts them only when they change something, and
a bad value is one line naming the key."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from study.config.hold import DEFAULT_HOLD, Hold
from study.config.space import Stratum
from study.config.study import TrainingSeeds
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import UsageError
from study.runner.launch import fingerprint
from tests.config.test_studyfile import BASE


def study_with(**settings: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(settings)
    return data


def specs(data: dict[str, Any]) -> list[Any]:
    config = parse_study(data, "x.yaml")
    return [config.trial_spec(s, {"learning_rate": 0.1}) for s in config.strata]


def test_defaults_measure_no_noise_and_exact_steps() -> None:
    config = parse_study(study_with(), "x.yaml")
    assert (config.settings.noise_scale, config.settings.exact_steps) == (False, True)
    assert all(not s.settings.noise_scale and s.settings.exact_steps for s in specs(study_with()))
    nulls = parse_study(study_with(noise_scale=None, exact_steps=None), "x.yaml")
    assert (nulls.settings.noise_scale, nulls.settings.exact_steps) == (False, True)


def test_every_trial_of_the_study_gets_the_settings() -> None:
    found = specs(study_with(noise_scale=True, exact_steps=False))
    assert len(found) == 2
    assert all(s.settings.noise_scale and not s.settings.exact_steps for s in found)
    config = parse_study(study_with(noise_scale=True, exact_steps=False), "x.yaml")
    confirm = config.trial_spec(Stratum(8, "default"), {"learning_rate": 0.1}, seed=3)
    assert (
        confirm.settings.noise_scale
        and not confirm.settings.exact_steps
        and confirm.settings.seed == 3
    )
    assert confirm.to_params()["noise_scale"] is True


def test_the_schema_accepts_the_settings() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(study_with(noise_scale=True, exact_steps=False), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(study_with(noise_scale="yes"), schema)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("noise_scale", "yes", "x.yaml: noise_scale must be true or false (got 'yes')"),
        ("exact_steps", 1, "x.yaml: exact_steps must be true or false (got 1)"),
    ],
)
def test_bad_values_are_one_line(key: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_study(study_with(**{key: value}), "x.yaml")
    assert str(err.value) == message


def test_fingerprint_counts_the_settings_only_when_they_change_the_trials() -> None:
    plain = fingerprint(parse_study(study_with(), "x.yaml"))
    defaults = fingerprint(parse_study(study_with(noise_scale=False, exact_steps=True), "x.yaml"))
    assert defaults == plain  # an older study, or the defaults written out: the same study
    noisy = fingerprint(parse_study(study_with(noise_scale=True), "x.yaml"))
    coarse = fingerprint(parse_study(study_with(exact_steps=False), "x.yaml"))
    assert len({plain, noisy, coarse}) == 3


def test_target_hold_defaults_reaches_every_trial_and_reads_off() -> None:
    assert all(s.target.hold == DEFAULT_HOLD for s in specs(study_with()))
    assert all(s.target.hold == DEFAULT_HOLD for s in specs(study_with(target_hold=None)))
    custom = specs(study_with(target_hold={"fraction": 0.1, "min_steps": 20}))
    assert {s.target.hold for s in custom} == {Hold(0.1, 20)}
    assert custom[0].to_params()["target_hold"] == "10%,20"
    assert {s.target.hold for s in specs(study_with(target_hold={"min_steps": 0}))} == {
        Hold(0.05, 0)
    }
    for off in ("off", False):
        assert {s.target.hold for s in specs(study_with(target_hold=off))} == {Hold.OFF}


def test_the_schema_accepts_target_hold() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    for value in ({"fraction": 0.1, "min_steps": 3}, "off", False, None):
        jsonschema.validate(study_with(target_hold=value), schema)
    for bad in ({"fraction": 2}, {"steps": 3}, "sometimes"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(study_with(target_hold=bad), schema)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"fraction": 1.5}, "x.yaml: target_hold.fraction must be in [0, 1] (got 1.5)"),
        ({"min_steps": -2}, "x.yaml: target_hold.min_steps must be >= 0 (got -2)"),
        ({"min_steps": 2.5}, "x.yaml: target_hold.min_steps must be an integer; write a whole"),
        ({"window": 3}, "x.yaml: unknown key 'window' in target_hold"),
        ("sometimes", "x.yaml: target_hold must be {fraction: F, min_steps: N} or off"),
    ],
)
def test_bad_target_hold_is_one_line_naming_the_key(value: Any, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_study(study_with(target_hold=value), "x.yaml")
    assert str(err.value).startswith(message)


def test_fingerprint_counts_target_hold_only_when_it_is_not_the_default() -> None:
    plain = fingerprint(parse_study(study_with(), "x.yaml"))
    written = {"fraction": 0.05, "min_steps": 5}
    assert fingerprint(parse_study(study_with(target_hold=written), "x.yaml")) == plain
    assert fingerprint(parse_study(study_with(target_hold="off"), "x.yaml")) != plain


def test_trials_draw_their_training_seeds_from_the_studys_unless_pinned() -> None:
    config = parse_study(study_with(seed=7), "x.yaml")
    assert config.training_seeds is TrainingSeeds.PER_TRIAL
    stratum = config.strata[0]
    seeds = [
        config.trial_spec(stratum, {"learning_rate": 0.1}, number=n).settings.seed
        for n in range(50)
    ]
    assert len(set(seeds)) == 50 and all(0 <= s < 2**31 for s in seeds)
    again = parse_study(study_with(seed=7), "x.yaml")  # the same file: the same seeds
    assert seeds == [again.trial_seed(stratum, n) for n in range(50)]
    other = parse_study(study_with(seed=8), "x.yaml")
    assert not set(seeds) & {other.trial_seed(stratum, n) for n in range(50)}
    neighbour = config.strata[1]
    assert not set(seeds) & {config.trial_seed(neighbour, n) for n in range(50)}
    # a confirmation's own seed wins; no number: the study's seed
    assert config.trial_spec(stratum, {"learning_rate": 0.1}, seed=8, number=3).settings.seed == 8
    assert config.trial_spec(stratum, {"learning_rate": 0.1}).settings.seed == 7
    pinned = parse_study(study_with(seed=7, training_seeds="pinned"), "x.yaml")
    assert pinned.training_seeds is TrainingSeeds.PINNED
    assert {pinned.trial_seed(stratum, n) for n in range(50)} == {7}


def test_training_seeds_errors_schema_and_fingerprint() -> None:
    with pytest.raises(UsageError) as err:
        parse_study(study_with(training_seeds="random"), "x.yaml")
    assert str(err.value).startswith("x.yaml: training_seeds must be one of per_trial, pinned")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(study_with(training_seeds="pinned"), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(study_with(training_seeds="random"), schema)
    plain = fingerprint(parse_study(study_with(), "x.yaml"))
    assert fingerprint(parse_study(study_with(training_seeds="per_trial"), "x.yaml")) == plain
    assert fingerprint(parse_study(study_with(training_seeds="pinned"), "x.yaml")) != plain
