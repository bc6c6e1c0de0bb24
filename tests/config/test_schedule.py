"""The batch-size schedule: stages by examples seen, the learning rate per batch size, inline
stages, a schedule under a curve of limits, and the section's keys read without the schedules
extension (`study train --batch-schedule FILE`). The study file's section as schedule trials is
`tests/ext/schedules/test_section.py`'s."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from study.config.schedule import (
    DEFAULT_SEEDS,
    BatchSchedule,
    Stage,
    format_stages,
    load_schedule,
    parse_stages,
    read_section,
    schedule_under,
)
from study.config.yaml_reader import Reader
from study.errors import FieldError, UsageError
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


def test_inline_stages() -> None:
    stages = parse_stages("32, 128@40960,512@200_000")
    assert stages == (Stage(0, 32), Stage(40960, 128), Stage(200000, 512))
    assert format_stages(stages) == "32@0,128@40960,512@200000"
    for bad in ("32,128", "x@0", "32@0,64@y"):
        with pytest.raises(FieldError, match="stages"):
            parse_stages(bad)


def _stages(*pairs: tuple[int, int]) -> list[dict[str, int]]:
    return [{"from_examples": e, "batch_size": b} for e, b in pairs]


def test_replicas_named_on_the_schedule() -> None:
    schedule = BatchSchedule((Stage(0, 32), Stage(64, 48)), 0.1)
    schedule.check_replicas(2)
    with pytest.raises(FieldError, match=r"stages\[1\]\.batch_size must be divisible by the 32"):
        schedule.check_replicas(32)


def test_the_section_and_a_snippet_read_without_the_extension(monkeypatch) -> None:
    monkeypatch.setenv("STUDY_EXTENSIONS", "none")
    snippet = {"batch_schedule": {**copy.deepcopy(SECTION), "seeds": 4, "strategy": "default"}}
    plan = load_schedule(snippet, learning_rate=1.0, source="s.yaml")
    assert plan == BatchSchedule((Stage(0, 32), Stage(40960, 128)), 0.01, 0.5)
    schedule, seeds, strategy = read_section(Reader("s.yaml"), snippet["batch_schedule"])
    assert (schedule, seeds, strategy) == (plan, 4, "default")
    assert read_section(Reader("s.yaml"), SECTION)[1:] == (DEFAULT_SEEDS, None)
    bad = {"batch_schedule": {**copy.deepcopy(SECTION), "seeds": 0}}
    with pytest.raises(UsageError, match=r"^s\.yaml: batch_schedule\.seeds must be >= 1 \(got 0\)"):
        load_schedule(bad, learning_rate=1.0, source="s.yaml")


def test_a_schedule_under_a_curve_of_limits() -> None:
    plan = schedule_under([(1000, 70), (5000, 300), (9000, 100)], b0=16, grid=[8, 16, 64, 256],
                          learning_rate=0.1, alpha=0.5)  # fmt: skip
    assert plan.stages == (Stage(0, 16), Stage(1000, 64), Stage(5000, 256))  # never falls
    assert plan.learning_rate_for(64) == pytest.approx(0.2)
    assert schedule_under([(10, 4)], b0=16, grid=[8], learning_rate=0.1, alpha=0).stages == (
        Stage(0, 16),
    )  # never below b0
