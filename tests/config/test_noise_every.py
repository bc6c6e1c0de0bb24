"""How often a trial measures the gradient noise scale (``noise_every``): the trial spec, the
study file (default, null, schema, bad values as one line), the fingerprint, the CLI flags and
the pilot's denser default."""

from __future__ import annotations

import json

import jsonschema
import pytest

from study.cli import build_parser
from study.commands.train import build_spec
from study.config.rules import FieldError
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.config.trial import NOISE_EVERY, PILOT_NOISE_EVERY
from study.errors import UsageError
from study.runner.launch import fingerprint
from tests.config.test_measurement_settings import specs, study_with
from tests.fakes import tabular_spec


def test_the_spec_checks_it_and_logs_it_only_when_measuring() -> None:
    assert tabular_spec().settings.noise_every == NOISE_EVERY == 16
    assert "noise_every" not in tabular_spec().to_params()
    assert tabular_spec(noise_scale=True, noise_every=4).to_params()["noise_every"] == 4
    for bad in (0, -3, 2.5, True):
        with pytest.raises(FieldError, match="noise_every"):
            tabular_spec(noise_every=bad)


def test_the_study_file_sets_it_for_every_trial() -> None:
    assert parse_study(study_with(), "x.yaml").settings.noise_every == NOISE_EVERY
    assert parse_study(study_with(noise_every=None), "x.yaml").settings.noise_every == NOISE_EVERY
    found = specs(study_with(noise_scale=True, noise_every=4))
    assert found and all(s.settings.noise_scale and s.settings.noise_every == 4 for s in found)
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(study_with(noise_every=4), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(study_with(noise_every=0), schema)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "x.yaml: noise_every must be >= 1 (got 0)"),
        ("often", "x.yaml: noise_every must be an integer (got 'often')"),
    ],
)
def test_bad_values_are_one_line(value: object, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_study(study_with(noise_every=value), "x.yaml")
    assert str(err.value) == message


def test_the_fingerprint_counts_it_only_when_it_changes() -> None:
    plain = fingerprint(parse_study(study_with(noise_scale=True), "x.yaml"))
    default = fingerprint(parse_study(study_with(noise_scale=True, noise_every=16), "x.yaml"))
    denser = fingerprint(parse_study(study_with(noise_scale=True, noise_every=4), "x.yaml"))
    assert default == plain != denser


def test_the_flags_reach_the_spec() -> None:
    parser = build_parser()
    train = build_spec(parser.parse_args(["train", "--workload", "tabular", "--noise-scale"]))
    assert train.settings.noise_every == NOISE_EVERY
    args = ["train", "--workload", "tabular", "--noise-scale", "--noise-every", "3"]
    assert build_spec(parser.parse_args(args)).settings.noise_every == 3
    pilot = parser.parse_args(["noise-scale", "--workload", "tabular"])
    assert pilot.noise_every == PILOT_NOISE_EVERY < NOISE_EVERY
    with pytest.raises(UsageError, match="--noise-every must be >= 1"):
        build_spec(parser.parse_args([*args[:-1], "0"]))
    alone = ["train", "--workload", "tabular", "--noise-every", "4"]
    with pytest.raises(UsageError, match="--noise-every 4 needs --noise-scale"):
        build_spec(parser.parse_args(alone))
