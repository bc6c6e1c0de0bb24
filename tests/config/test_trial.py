"""Tests for study.config.trial: validation of specs and the evaluation cadence."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, ScheduleSpec, TrialSpec
from study.errors import UsageError

TARGET = Target.parse("val_accuracy>=0.9")


def spec(**changes: object) -> TrialSpec:
    fields = {
        "workload": "mnist1d",
        "batch_size": 32,
        "optimizer": OptimizerSpec(),
        "target": TARGET,
    }
    fields.update(changes)
    return TrialSpec(**fields)  # type: ignore[arg-type]


# OptimizerSpec


@pytest.mark.parametrize("lr", [0, 0.0, -0.1, float("inf"), float("nan")])
def test_learning_rate_must_be_positive(lr: float) -> None:
    with pytest.raises(UsageError, match=r"^--lr must be > 0 \(got"):
        OptimizerSpec(learning_rate=lr)


def test_unknown_optimizer_lists_choices() -> None:
    with pytest.raises(UsageError, match=r"unknown optimizer 'rmsprop'; choose from sgd, momentum"):
        OptimizerSpec(name="rmsprop")


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("momentum", 1.0, "--momentum"),
        ("momentum", -0.1, "--momentum"),
        ("beta1", 1.0, "--beta1"),
        ("beta2", 1.5, "--beta2"),
        ("epsilon", 0.0, "--epsilon"),
        ("weight_decay", -1e-4, "--weight-decay"),
    ],
)
def test_optimizer_metaparameter_ranges(field: str, value: float, option: str) -> None:
    with pytest.raises(UsageError, match=rf"^{option} must be .*\(got {value}\)"):
        OptimizerSpec(**{field: value})


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam"])
def test_known_optimizers(name: str) -> None:
    assert OptimizerSpec(name=name, learning_rate=0.5).name == name


# ScheduleSpec


def test_unknown_schedule_lists_choices() -> None:
    with pytest.raises(
        UsageError, match=r"unknown schedule 'step'; choose from constant, linear, cosine"
    ):
        ScheduleSpec(name="step")


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"warmup_steps": -1}, r"--warmup must be >= 0 steps \(got -1\)"),
        ({"decay_steps": 0}, r"--decay-steps must be >= 1 \(got 0\)"),
        ({"end_factor": 1.5}, r"--end-factor must be in \[0, 1\] \(got 1.5\)"),
    ],
)
def test_schedule_ranges(changes: dict, pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern):
        ScheduleSpec(**changes)


def test_schedule_end_factor_one_is_allowed() -> None:
    assert ScheduleSpec(name="linear", end_factor=1.0, decay_steps=10).end_factor == 1.0


# Budget


def test_budget_needs_a_limit() -> None:
    with pytest.raises(UsageError, match="give at least one of --max-steps, --max-examples"):
        Budget(max_steps=None, max_examples=None, max_seconds=None)


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"max_steps": 0}, r"--max-steps must be >= 1 \(got 0\)"),
        ({"max_examples": 0}, r"--max-examples must be >= 1 \(got 0\)"),
        ({"max_seconds": 0.0}, r"--max-seconds must be > 0 \(got 0.0\)"),
    ],
)
def test_budget_limits_must_be_positive(changes: dict, pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern):
        Budget(**changes)


def test_budget_step_limit() -> None:
    assert Budget(max_steps=100).step_limit(32) == 100
    assert Budget(max_steps=100, max_examples=320).step_limit(32) == 10
    assert Budget(max_steps=None, max_examples=10).step_limit(64) == 1
    assert Budget(max_steps=None, max_seconds=5.0).step_limit(8) is None


# TrialSpec


@pytest.mark.parametrize("batch_size", [0, -8])
def test_batch_size_must_be_positive(batch_size: int) -> None:
    with pytest.raises(UsageError, match=rf"--batch-size must be >= 1 \(got {batch_size}\)"):
        spec(batch_size=batch_size)


@pytest.mark.parametrize("batch_size", [1.5, True])
def test_batch_size_must_be_an_integer(batch_size: object) -> None:
    with pytest.raises(UsageError, match="--batch-size must be an integer"):
        spec(batch_size=batch_size)


def test_trial_spec_to_params_is_flat() -> None:
    params = spec(workload_options={"samples": 100}, strategy="mirrored:2").to_params()
    assert params["batch_size"] == 32
    assert params["strategy"] == "mirrored:2"
    assert params["optimizer"] == "nesterov"
    assert params["optimizer.learning_rate"] == 0.1
    assert params["schedule"] == "constant"
    assert params["budget.max_steps"] == 10_000
    assert params["workload.samples"] == 100
    assert params["target"] == "val_accuracy>=0.9"
    assert "budget.max_seconds" not in params  # None values are dropped
    assert all(isinstance(v, (str, int, float)) for v in params.values())


def test_trial_spec_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec().batch_size = 64  # type: ignore[misc]


# EvalCadence


def steps(cadence: EvalCadence, count: int, start: int = 0) -> list[int]:
    out, step = [], start
    for _ in range(count):
        step = cadence.next_step(step)
        out.append(step)
    return out


def test_geometric_cadence_from_zero() -> None:
    cadence = EvalCadence.parse("geometric:1.25")
    assert (cadence.kind, cadence.ratio) == ("geometric", 1.25)
    assert steps(cadence, 10) == [1, 2, 3, 4, 5, 7, 9, 12, 15, 19]
    assert str(cadence) == "geometric:1.25"


def test_geometric_default_ratio() -> None:
    cadence = EvalCadence.parse("geometric")
    assert cadence.ratio == 1.05
    seq = steps(cadence, 40)
    assert seq[:5] == [1, 2, 3, 4, 5]
    assert all(b > a for a, b in itertools.pairwise(seq))


@pytest.mark.parametrize("text", ["25", 25, " 25 "])
def test_fixed_cadence(text: object) -> None:
    cadence = EvalCadence.parse(text)  # type: ignore[arg-type]
    assert (cadence.kind, cadence.every) == ("fixed", 25)
    assert steps(cadence, 3) == [25, 50, 75]
    assert cadence.next_step(24) == 25
    assert cadence.next_step(26) == 50
    assert str(cadence) == "25"


@pytest.mark.parametrize("text", ["often", "geometric:x", "2.5", ""])
def test_cadence_parse_errors_name_the_value(text: str) -> None:
    with pytest.raises(UsageError, match=rf"--eval-every: cannot parse {text.strip()!r}"):
        EvalCadence.parse(text)


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"kind": "fixed", "every": 0}, r"--eval-every must be >= 1 step \(got 0\)"),
        ({"ratio": 1.0}, r"geometric ratio must be > 1 \(got 1.0\)"),
        ({"ratio": 0.5}, r"geometric ratio must be > 1 \(got 0.5\)"),
    ],
)
def test_cadence_values_are_validated(changes: dict, pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern):
        EvalCadence(**changes)


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("0", r"--eval-every must be >= 1 step \(got 0\)"),
        ("geometric:1.0", r"geometric ratio must be > 1 \(got 1.0\)"),
        ("geometric:0.5", r"geometric ratio must be > 1 \(got 0.5\)"),
    ],
)
def test_cadence_parse_rejects_out_of_range_values(text: str, pattern: str) -> None:
    # The rule and the value are named, not a generic "cannot parse".
    with pytest.raises(UsageError, match=pattern):
        EvalCadence.parse(text)


def test_unknown_cadence_kind() -> None:
    with pytest.raises(UsageError, match="unknown cadence 'daily'"):
        EvalCadence(kind="daily")
