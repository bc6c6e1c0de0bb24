"""Tests for study.config.sections: the trial settings read once from a study file's keys.

The other sections (tuner, heartbeat, allocation, target, options) are tested through
`parse_study` in test_studyfile.py and the setting tests next to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from study.config.sections import SETTING_KEYS, read_settings
from study.config.studyfile import TOP_LEVEL_KEYS
from study.config.trial import Budget, EvalCadence, TrialSettings
from study.config.yaml_reader import Reader
from study.errors import UsageError


def settings(**keys: Any) -> TrialSettings:
    return read_settings(Reader("s.yaml"), {"budget": {"max_steps": 500}, **keys})


def test_every_setting_is_a_top_level_key() -> None:
    assert set(SETTING_KEYS) <= set(TOP_LEVEL_KEYS)


def test_keys_left_out_keep_the_record_defaults() -> None:
    assert settings() == TrialSettings(budget=Budget(max_steps=500))
    nulls = settings(loss=None, noise_scale=None, noise_every=None, exact_steps=None)
    assert nulls == settings()


def test_each_key_reaches_its_field() -> None:
    read = settings(
        eval_every=25,
        seed=3,
        loss="mse",
        precision="float32",
        jit_compile=False,  # YAML's off
        noise_scale=True,
        noise_every=4,
        exact_steps=False,
    )
    assert read == TrialSettings(
        budget=Budget(max_steps=500),
        cadence=EvalCadence(kind="fixed", every=25),
        seed=3,
        loss="mse",
        precision="float32",
        jit_compile="off",
        noise_scale=True,
        noise_every=4,
        exact_steps=False,
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"seed": -1}, "s.yaml: seed must be >= 0 (got -1)"),
        ({"seed": 1.5}, "s.yaml: seed must be an integer; write a whole number without a decimal "
         "point (got 1.5)"),
        ({"noise_every": 0}, "s.yaml: noise_every must be >= 1 (got 0)"),
        ({"noise_scale": "yes"}, "s.yaml: noise_scale must be true or false (got 'yes')"),
        ({"precision": "fp8"}, "s.yaml: precision must be one of auto, float32, mixed_float16, "
         "mixed_bfloat16 (got 'fp8')"),
        ({"budget": {"max_steps": 0}}, "s.yaml: budget.max_steps must be >= 1 (got 0)"),
        ({"eval_every": 0}, "s.yaml: eval_every must be >= 1 (got 0)"),
    ],
)  # fmt: skip
def test_errors_name_the_file_and_key(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as info:
        settings(**keys)
    assert str(info.value) == message
