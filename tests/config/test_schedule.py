"""The batch-size schedule: stages by examples seen, the learning rate per batch size, the
study-file section (read, written back, valid for the schema) and one line per bad value."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from study.config.schedule import (
    BatchSchedule,
    ScheduleTrials,
    Stage,
    format_stages,
    load_schedule,
    parse_stages,
)
from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import FieldError, UsageError
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


def with_schedule(section: Any, **space: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["batch_schedule"] = section
    data["search_space"].update(space)
    return data


def test_stages_by_examples_seen_and_the_rate_per_batch() -> None:
    s = BatchSchedule((Stage(0, 32), Stage(40960, 128)), learning_rate=0.01, alpha=0.5)
    assert (s.batch_size_at(0), s.batch_size_at(40959), s.batch_size_at(40960)) == (32, 32, 128)
    assert s.learning_rate_for(32) == pytest.approx(0.01)
    assert s.learning_rate_for(128) == pytest.approx(0.02)  # (128 / 32) ** 0.5 = 2
    assert s.stage_starts() == ((0, 0), (1280, 40960))
    assert s.examples_after(1280) == 40960 and s.examples_after(1282) == 40960 + 256
    linear = BatchSchedule((Stage(0, 8), Stage(100, 64)), learning_rate=0.1, alpha=1.0)
    assert linear.learning_rate_for(64) == pytest.approx(0.8)


def test_a_boundary_inside_a_step_starts_the_stage_at_the_next_step() -> None:
    s = BatchSchedule((Stage(0, 32), Stage(100, 64), Stage(120, 128)), learning_rate=0.1)
    # 4 steps of 32 reach 128 examples, past both 100 and 120: stage 1 gets no steps
    assert s.stage_starts() == ((0, 0), (4, 128), (4, 128))
    assert [s.batch_size_at(s.examples_after(k)) for k in range(6)] == [32, 32, 32, 32, 128, 128]


def test_section_reads_back_and_the_snippet_parses_as_a_study_file_section() -> None:
    config = parse_study(with_schedule(SECTION), "x.yaml")
    trials = config.batch_schedule
    assert trials == ScheduleTrials(
        BatchSchedule((Stage(0, 32), Stage(40960, 128)), 0.01, 0.5), seeds=3, strategy="default"
    )
    assert config.schedule_trials == 3 and config.schedule_strategy == "default"
    snippet = trials.schedule.snippet(seeds=4)
    assert snippet.startswith("batch_schedule:")
    assert "- {from_examples: 40960, batch_size: 128}" in snippet
    section = yaml.safe_load(snippet)["batch_schedule"]
    again = parse_study(with_schedule(section), "y.yaml").batch_schedule
    assert again is not None and again.schedule == trials.schedule and again.seeds == 4
    assert BatchSchedule.from_mapping(trials.schedule.to_mapping()) == trials.schedule
    jsonschema.validate(with_schedule(section), json.loads(SCHEMA_PATH.read_text("utf-8")))


def test_no_section_no_schedule_trials_and_the_same_fingerprint() -> None:
    plain = parse_study(copy.deepcopy(BASE), "x.yaml")
    assert plain.batch_schedule is None and plain.schedule_trials == 0
    # the schedule trials come on top of the search: the search's trials are the same
    assert fingerprint(parse_study(with_schedule(SECTION), "x.yaml")) == fingerprint(plain)


def test_inline_stages() -> None:
    stages = parse_stages("32, 128@40960,512@200_000")
    assert stages == (Stage(0, 32), Stage(40960, 128), Stage(200000, 512))
    assert format_stages(stages) == "32@0,128@40960,512@200000"
    for bad in ("32,128", "x@0", "32@0,64@y"):
        with pytest.raises(FieldError, match="stages"):
            parse_stages(bad)


def _stages(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    return [{"from_examples": e, "batch_size": b} for e, b in pairs]


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


def test_replicas_named_on_the_schedule() -> None:
    schedule = BatchSchedule((Stage(0, 32), Stage(64, 48)), 0.1)
    schedule.check_replicas(2)
    with pytest.raises(FieldError, match=r"stages\[1\]\.batch_size must be divisible by the 32"):
        schedule.check_replicas(32)


def test_a_stage_warmup_reads_back_and_names_its_own_cell() -> None:
    """``stage_warmup_steps`` goes through the section, the snippet, the params and the schema;
    a schedule without it keeps the mapping (and so the digest) it had before the key existed."""
    section = {**copy.deepcopy(SECTION), "stage_warmup_steps": 30}
    trials = parse_study(with_schedule(section), "x.yaml").batch_schedule
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
