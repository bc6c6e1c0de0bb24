"""The study file's ``batch_schedule:`` section as schedule trials (`study.ext.schedules.section`):
read, written back, valid for the schema, no part of the fingerprint, one line per bad value."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from study.config.schedule import BatchSchedule, Stage, load_schedule
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import FieldError, UsageError
from study.ext.schedules.section import ScheduleTrials, schedule_strategy, trials_of
from study.runner.launch import fingerprint
from tests.config.test_studyfile import BASE

SECTION: dict[str, Any] = {
    "learning_rate": 0.01,
    "lr_scaling": {"alpha": 0.5},
    "stages": [
        {"from_examples": 0, "batch_size": 32},
        {"from_examples": 40960, "batch_size": 128},
    ],
}


def _stages(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    return [{"from_examples": e, "batch_size": b} for e, b in pairs]


def with_schedule(section: Any, **space: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["batch_schedule"] = section
    data["search_space"].update(space)
    return data


def test_section_reads_back_and_the_snippet_parses_as_a_study_file_section() -> None:
    config = parse_study(with_schedule(SECTION), "x.yaml")
    trials = trials_of(config)
    assert trials == ScheduleTrials(
        BatchSchedule((Stage(0, 32), Stage(40960, 128)), 0.01, 0.5), seeds=3, strategy="default"
    )
    assert schedule_strategy(config) == "default"
    snippet = trials.schedule.snippet(seeds=4)
    assert snippet.startswith("batch_schedule:")
    assert "- {from_examples: 40960, batch_size: 128}" in snippet
    section = yaml.safe_load(snippet)["batch_schedule"]
    again = trials_of(parse_study(with_schedule(section), "y.yaml"))
    assert again is not None and again.schedule == trials.schedule and again.seeds == 4
    assert BatchSchedule.from_mapping(trials.schedule.to_mapping()) == trials.schedule
    jsonschema.validate(with_schedule(section), json.loads(SCHEMA_PATH.read_text("utf-8")))


def test_no_section_no_schedule_trials_and_the_same_fingerprint() -> None:
    plain = parse_study(copy.deepcopy(BASE), "x.yaml")
    assert trials_of(plain) is None and schedule_strategy(plain) == "default"
    # the schedule trials come on top of the search: the search's trials are the same
    assert fingerprint(parse_study(with_schedule(SECTION), "x.yaml")) == fingerprint(plain)


@pytest.mark.parametrize(
    ("change", "space", "message"),
    [
        (
            {"stages": _stages((0, 64), (100, 32))},
            {},
            "x.yaml: batch_schedule.stages[1].batch_size must be greater than "
            "stages[0].batch_size (64): a schedule increases (got 32)",
        ),
        (
            {"stages": _stages((0, 32), (0, 64))},
            {},
            "x.yaml: batch_schedule.stages[1].from_examples must be greater than "
            "stages[0].from_examples (0): a schedule increases (got 0)",
        ),
        (
            {"stages": _stages((10, 32))},
            {},
            "x.yaml: batch_schedule.stages[0].from_examples must be 0 "
            "(the first stage starts training) (got 10)",
        ),
        ({"learning_rate": 0}, {}, "x.yaml: batch_schedule.learning_rate must be > 0 (got 0)"),
        (
            {"lr_scaling": {"alpha": "half"}},
            {},
            "x.yaml: batch_schedule.lr_scaling.alpha must be a number (got 'half')",
        ),
        ({"seeds": 0}, {}, "x.yaml: batch_schedule.seeds must be >= 1 (got 0)"),
        (
            {"stage_warmup_steps": -1},
            {},
            "x.yaml: batch_schedule.stage_warmup_steps must be >= 0 (got -1)",
        ),
        (
            {"stages": []},
            {},
            "x.yaml: batch_schedule.stages must be a list of {from_examples: N, batch_size: B} "
            "(got [])",
        ),
        (
            {"stages": _stages((0, 30), (100, 64))},
            {"strategy": ["mirrored:4"]},
            "x.yaml: batch_schedule.stages[0].batch_size must be divisible by the 4 replicas "
            "on mirrored:4 (got 30)",
        ),
        (
            {"strategy": "mirrored:2"},
            {},
            "x.yaml: batch_schedule.strategy must be one of the study's strategies (default) "
            "(got 'mirrored:2')",
        ),
        ({"batch": 3}, {}, "x.yaml: unknown key 'batch' in batch_schedule"),
    ],
)
def test_bad_input_is_one_line(change: dict[str, Any], space: dict, message: str) -> None:
    section = {**copy.deepcopy(SECTION), **change}
    with pytest.raises(UsageError) as info:
        parse_study(with_schedule(section, **space), "x.yaml")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_a_stage_warmup_reads_back_and_names_its_own_cell() -> None:
    """``stage_warmup_steps`` goes through the section, the snippet, the params and the schema;
    a schedule without it keeps the mapping (and so the digest) it had before the key existed."""
    section = {**copy.deepcopy(SECTION), "stage_warmup_steps": 30}
    trials = trials_of(parse_study(with_schedule(section), "x.yaml"))
    assert trials is not None and trials.schedule.stage_warmup_steps == 30
    again = yaml.safe_load(trials.schedule.snippet())["batch_schedule"]
    assert again["stage_warmup_steps"] == 30
    assert BatchSchedule.from_mapping(again) == trials.schedule
    assert trials.schedule.to_params()["batch_schedule.stage_warmup_steps"] == 30
    jsonschema.validate(with_schedule(section), json.loads(SCHEMA_PATH.read_text("utf-8")))
    plain = BatchSchedule.from_mapping(SECTION)
    assert "stage_warmup_steps" not in plain.to_mapping()
    assert plain.digest() != trials.schedule.digest()
    inline = load_schedule("32,128@40960", learning_rate=0.01, stage_warmup_steps=5)
    assert inline.stage_warmup_steps == 5
    with pytest.raises(FieldError, match="stage_warmup_steps must be >= 0"):
        BatchSchedule((Stage(0, 32),), 0.01, stage_warmup_steps=-2)
