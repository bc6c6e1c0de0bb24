"""The study file's ``heartbeat`` section: defaults, seconds as written, the schema, and one
line naming the key, the rule and the value for each bad setting."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from study.config.study import Heartbeat
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import UsageError
from tests.config.test_studyfile import BASE


def with_heartbeat(value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["heartbeat"] = value
    return data


def test_default_is_ten_and_sixty_seconds() -> None:
    assert parse_study(copy.deepcopy(BASE), "x.yaml").heartbeat == Heartbeat(10.0, 60.0)
    assert parse_study(with_heartbeat(None), "x.yaml").heartbeat == Heartbeat(10.0, 60.0)


def test_seconds_as_written_and_valid_for_the_schema() -> None:
    data = with_heartbeat({"interval": 1, "grace": 3.5})
    assert parse_study(data, "x.yaml").heartbeat == Heartbeat(1.0, 3.5)
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert parse_study(with_heartbeat({"grace": 30}), "x.yaml").heartbeat == Heartbeat(10, 30)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"interval": 0}, "x.yaml: heartbeat.interval must be a number of seconds > 0 (got 0)"),
        ({"interval": 10, "grace": 15}, "heartbeat.grace must be at least twice"),
        ({"grace": "1m"}, "x.yaml: heartbeat.grace must be a number (got '1m')"),
        ({"every": 5}, "x.yaml: unknown key 'every' in heartbeat (known: interval, grace)"),
        (5, "x.yaml: heartbeat must be a mapping (got 5)"),
    ],
)
def test_bad_settings_are_one_line(value: Any, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_study(with_heartbeat(value), "x.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)
