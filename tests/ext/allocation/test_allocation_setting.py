"""The study file's ``allocation``: even by default, adaptive with rounds, by steps with its
budget of training steps (the modes this extension adds), valid for the schema, one line per bad
value, and no part of the study's fingerprint (it decides how many trials, not what a trial
is)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import jsonschema
import pytest

from study.config.study import Allocation, AllocationMode
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import UsageError
from study.ext.allocation.rounds import RoundAllocator
from study.runner.launch import fingerprint
from tests.config.test_studyfile import BASE


def with_allocation(value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["allocation"] = value
    return data


def test_default_is_even() -> None:
    assert parse_study(copy.deepcopy(BASE), "x.yaml").allocation == Allocation()
    even = parse_study(with_allocation(None), "x.yaml").allocation
    assert even.mode is AllocationMode.EVEN and not even.rounds_of
    assert parse_study(with_allocation({"mode": "even"}), "x.yaml").allocation.mode is (
        AllocationMode.EVEN
    )


def test_adaptive_with_rounds_is_valid_for_the_schema() -> None:
    data = with_allocation({"mode": "adaptive", "rounds": 2})
    config = parse_study(data, "x.yaml")
    assert config.allocation == Allocation("adaptive", 2)
    assert config.allocation.mode == "adaptive" and config.allocation.rounds_of
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert parse_study(with_allocation({"mode": "adaptive"}), "x.yaml").allocation.rounds == 3
    assert fingerprint(config) == fingerprint(parse_study(copy.deepcopy(BASE), "x.yaml"))


def test_steps_with_its_budget_is_valid_for_the_schema() -> None:
    data = with_allocation({"mode": "steps", "steps": 20_000})
    config = parse_study(data, "x.yaml")
    assert config.allocation == Allocation("steps", steps=20_000)
    assert config.allocation.mode == "steps" and config.allocation.rounds_of
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    assert fingerprint(config) == fingerprint(parse_study(copy.deepcopy(BASE), "x.yaml"))
    # Built without a file: the allocator of the modes checks what is its own.
    without = replace(config, allocation=Allocation("steps"))
    with pytest.raises(UsageError, match=r"allocation\.steps must be the study's budget"):
        RoundAllocator(without, None, total=0)  # type: ignore[arg-type]
    adaptive = replace(config, allocation=Allocation("adaptive", steps=10))
    with pytest.raises(UsageError, match=r"allocation\.steps is the budget of mode steps"):
        RoundAllocator(adaptive, None, total=0)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"allocation\.steps is the budget of a mode that spe"):
        Allocation(AllocationMode.EVEN, steps=10)
    with pytest.raises(UsageError, match=r"allocation\.steps must be the study's budget"):
        Allocation("steps", steps=0)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"mode": "smart"},
            "x.yaml: allocation.mode must be one of even, adaptive, steps (got 'smart')",
        ),
        ({"mode": "adaptive", "rounds": 0}, "x.yaml: allocation.rounds must be >= 1 (got 0)"),
        ({"rounds": "2"}, "x.yaml: allocation.rounds must be an integer"),
        ({"every": 2}, "x.yaml: unknown key 'every' in allocation (known: mode, rounds, steps)"),
        (
            {"mode": "steps"},
            "x.yaml: allocation.steps is required with mode steps: the study's training steps",
        ),
        ({"mode": "steps", "steps": 0}, "x.yaml: allocation.steps must be >= 1 (got 0)"),
        ({"mode": "steps", "steps": 2.5e4}, "x.yaml: allocation.steps must be an integer"),
        (
            {"mode": "adaptive", "steps": 100},
            "x.yaml: allocation.steps applies to mode steps only (mode is adaptive) (got 100)",
        ),
    ],
)
def test_bad_values_are_one_line(value: Any, message: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_study(with_allocation(value), "x.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)
