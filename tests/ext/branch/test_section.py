"""The study file's ``branch:`` section (`study.ext.branch.section`): defaults, every key read, valid
for the schema, checkpoints spread geometrically, one line naming the key for each bad value,
and no part of the study's fingerprint."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from study.config.studyfile import SCHEMA_PATH, parse_study
from study.errors import UsageError
from study.ext.branch.branching import plan_branches
from study.ext.branch.section import BranchConfig, LrRule, Tolerance, branch_of
from study.runner.launch import fingerprint
from tests.config.test_studyfile import BASE

FULL = {
    "batch_size": 16,
    "learning_rate": 0.02,
    "examples": 32000,
    "checkpoints": 6,
    "first_checkpoint": 0.05,
    "multipliers": [2, 4, 8],
    "window": 1000,
    "replicates": 3,
    "lr_rule": "search",
    "alpha": 0.8,
    "search_factors": [0.5, 1.0, 2.0],
    "tolerance": {"loss": 0.03, "metric": 0.01, "basis": "loss"},
    "confidence": 0.8,
    "evaluations": 2,
    "max_replicates": 5,
    "resolve": 3.0,
    "max_examples": 40000,
    "recalibrate_batchnorm": False,
}


def with_branch(value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["branch"] = value
    return data


def test_no_section_is_none_and_an_empty_one_takes_the_defaults() -> None:
    assert branch_of(parse_study(copy.deepcopy(BASE), "x.yaml")) is None
    assert branch_of(parse_study(with_branch({}), "x.yaml")) == BranchConfig()


def test_every_key_read_and_valid_for_the_schema() -> None:
    data = with_branch(copy.deepcopy(FULL))
    branch = branch_of(parse_study(data, "x.yaml"))
    assert branch == BranchConfig(
        16, 0.02, 32000, 6, 0.05, (2, 4, 8), 1000, 3, LrRule.SEARCH, 0.8, (0.5, 1.0, 2.0),
        Tolerance(0.03, 0.01, "loss"), 0.8, 2, 5, 3.0, 40000, False,
    )  # fmt: skip
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    listed = with_branch({"checkpoints": [100, 400, 1600]})
    assert branch_of(parse_study(listed, "x.yaml")).checkpoint_examples(5000) == (100, 400, 1600)
    jsonschema.validate(listed, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def test_branch_section_is_no_part_of_the_fingerprint() -> None:
    plain = parse_study(copy.deepcopy(BASE), "x.yaml")
    assert fingerprint(parse_study(with_branch(copy.deepcopy(FULL)), "x.yaml")) == fingerprint(
        plain
    )


def test_checkpoints_are_geometric_from_the_first_fraction_to_the_end() -> None:
    points = BranchConfig(checkpoints=6, first_checkpoint=1 / 32).checkpoint_examples(32000)
    assert points == (1000, 2000, 4000, 8000, 16000, 32000)
    tight = BranchConfig(checkpoints=5, first_checkpoint=0.5).checkpoint_examples(4)
    assert list(tight) == sorted(set(tight)) and len(tight) == 5  # distinct even when tiny


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("batch_size", 0, "branch.batch_size must be >= 1 (got 0)"),
        ("learning_rate", -1.0, "branch.learning_rate must be > 0 (got -1.0)"),
        ("checkpoints", 1, "branch.checkpoints must be >= 2 (got 1)"),
        ("checkpoints", [400, 100], "branch.checkpoints must be increasing (got [400, 100])"),
        ("first_checkpoint", 1.5, "branch.first_checkpoint must be in (0, 1) (got 1.5)"),
        ("multipliers", [1, 2], "branch.multipliers must list integers >= 2 (got [1, 2])"),
        ("multipliers", [4, 2], "branch.multipliers must be increasing (got [4, 2])"),
        ("multipliers", [], "branch.multipliers must be a non-empty list (got [])"),
        ("replicates", 0, "branch.replicates must be >= 1 (got 0)"),
        ("max_replicates", 1, "branch.max_replicates must be >= replicates (2) (got 1)"),
        ("resolve", 1.0, "branch.resolve must be a finite factor > 1 (got 1.0)"),
        ("max_examples", 0, "branch.max_examples must be >= 1 (got 0)"),
        ("evaluations", 0, "branch.evaluations must be >= 1 (got 0)"),
        ("recalibrate_batchnorm", "yes", "branch.recalibrate_batchnorm must be true or false"),
        ("lr_rule", "guess", "branch.lr_rule must be one of fit, search (got 'guess')"),
        ("search_factors", [0.0], "branch.search_factors must list numbers > 0 (got [0.0])"),
        ("tolerance", {"loss": -0.1}, "branch.tolerance.loss must be >= 0 (got -0.1)"),
        ("tolerance", {"los": 0.1}, "unknown key 'los' in branch.tolerance"),
        ("tolerance", {"basis": "steps"}, "branch.tolerance.basis must be one of progress, loss"),
        ("confidence", 1.0, "branch.confidence must be in (0, 1) (got 1.0)"),
        ("windows", 10, "unknown key 'windows' in branch"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_study(with_branch({key: value}), "x.yaml")
    text = str(caught.value)
    assert text.startswith("x.yaml: ") and message in text and "\n" not in text


def test_plan_resolves_b0_window_and_rate_rule() -> None:
    config = parse_study(with_branch({"learning_rate": 0.1, "window": 1000}), "x.yaml")
    b0 = min(config.space.batch_sizes)
    plan = plan_branches(config)
    assert plan.b0 == b0 and plan.batch_sizes == (b0, 2 * b0, 4 * b0, 8 * b0, 16 * b0)
    assert plan.window % plan.batch_sizes[-1] == 0 and plan.window >= 1000
    assert plan.rule == "search" and "no fit" in plan.why and plan.factors == (0.5, 1.0, 2.0)
    fitted = plan_branches(config, fitted_alpha=0.7)
    assert fitted.rule == "fit" and fitted.factors == (1.0,) and fitted.alpha == 0.7
    assert fitted.rate(4 * b0) == pytest.approx(0.1 * 4**0.7)
    assert all(c % b0 == 0 for c in plan.checkpoints)


def test_plan_needs_a_rate_and_a_section() -> None:
    with pytest.raises(UsageError, match=r"branch\.learning_rate is missing"):
        plan_branches(parse_study(with_branch({}), "x.yaml"))
    with pytest.raises(UsageError, match="no branch section"):
        plan_branches(parse_study(copy.deepcopy(BASE), "x.yaml"))
