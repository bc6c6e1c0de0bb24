"""The study file's ``noise_scale`` and ``exact_steps``: defaults, every trial of the study gets
them, the schema accepts them, the fingerprint counts them only when they change something, and
a bad value is one line naming the key."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from study.config.space import Stratum
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
