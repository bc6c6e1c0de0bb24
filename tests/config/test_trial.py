"""Tests for study.config.trial: validation of specs, their settings and the evaluation cadence.

Bad values raise `FieldError` naming the data-model field (``optimizer.learning_rate``), not a
command-line flag: `study train` and the study-file parser name it (see their tests).
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from study.config.rules import FieldError
from study.config.space import CategoricalParam
from study.config.target import Target
from study.config.trial import (
    OPTIMIZER_RULES,
    SCHEDULE_RULES,
    Budget,
    EvalCadence,
    OptimizerSpec,
    ScheduleSpec,
    TrialSettings,
    TrialSpec,
)

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


@pytest.mark.parametrize("lr", [0, 0.0, -0.1, float("inf"), float("nan"), "0.1", True])
def test_learning_rate_must_be_positive(lr: float) -> None:
    with pytest.raises(FieldError) as info:
        OptimizerSpec(learning_rate=lr)
    err = info.value
    assert (err.field, err.rule, err.value) == ("optimizer.learning_rate", "must be > 0", lr)
    assert str(err).startswith("optimizer.learning_rate must be > 0 (got ")


def test_unknown_optimizer_lists_choices() -> None:
    with pytest.raises(FieldError) as info:
        OptimizerSpec(name="rmsprop")
    err = info.value
    assert (err.field, err.value) == ("optimizer", "rmsprop")
    assert err.rule == "must be one of sgd, momentum, nesterov, adam"
    assert (
        str(err)
        == "optimizer: unknown optimizer 'rmsprop'; choose from sgd, momentum, nesterov, adam"
    )


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("momentum", 1.0, "must be in [0, 1)"),
        ("momentum", -0.1, "must be in [0, 1)"),
        ("beta1", 1.0, "must be in [0, 1)"),
        ("beta2", 1.5, "must be in [0, 1)"),
        ("epsilon", 0.0, "must be > 0"),
        ("weight_decay", -1e-4, "must be >= 0"),
        ("weight_decay", float("inf"), "must be >= 0"),
    ],
)
def test_optimizer_metaparameter_ranges(field: str, value: float, rule: str) -> None:
    with pytest.raises(FieldError) as info:
        OptimizerSpec(**{field: value})
    assert str(info.value) == f"optimizer.{field} {rule} (got {value})"
    assert (info.value.field, info.value.rule) == (f"optimizer.{field}", rule)


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam"])
def test_known_optimizers(name: str) -> None:
    assert OptimizerSpec(name=name, learning_rate=0.5).name == name


# ScheduleSpec


def test_unknown_schedule_lists_choices() -> None:
    with pytest.raises(FieldError) as info:
        ScheduleSpec(name="step")
    assert info.value.field == "schedule"
    assert (
        str(info.value) == "schedule: unknown schedule 'step'; choose from constant, linear, cosine"
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"warmup_steps": -1}, "schedule.warmup_steps must be >= 0 steps (got -1)"),
        ({"decay_steps": 0}, "schedule.decay_steps must be >= 1 (got 0)"),
        ({"end_factor": 1.5}, "schedule.end_factor must be in [0, 1] (got 1.5)"),
    ],
)
def test_schedule_ranges(changes: dict, message: str) -> None:
    with pytest.raises(FieldError) as info:
        ScheduleSpec(**changes)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("learning_rate", 0.0),
        ("momentum", 1.0),
        ("beta2", -0.5),
        ("epsilon", 0.0),
        ("weight_decay", -1.0),
        ("end_factor", 1.5),
        ("warmup_steps", -1),
        ("decay_steps", 0),
    ],
)
def test_specs_and_search_spaces_share_the_rules(name: str, bad: float) -> None:
    # One rule per metaparameter: the spec and a search-space choice reject the same value.
    spec = OptimizerSpec if name in OPTIMIZER_RULES else ScheduleSpec
    with pytest.raises(FieldError) as in_spec:
        spec(**{name: bad})
    with pytest.raises(FieldError) as in_space:
        CategoricalParam(name, (bad,))
    rule = (OPTIMIZER_RULES | SCHEDULE_RULES)[name]
    assert in_space.value.field == f"{name}.choices[0]"
    assert in_space.value.rule == f"must be {'in ' if rule.startswith('[') else ''}{rule}"
    assert in_spec.value.rule.startswith(in_space.value.rule)  # warmup adds "steps"


def test_schedule_end_factor_one_is_allowed() -> None:
    assert ScheduleSpec(name="linear", end_factor=1.0, decay_steps=10).end_factor == 1.0


# Budget


def test_budget_needs_a_limit() -> None:
    with pytest.raises(FieldError) as info:
        Budget(max_steps=None, max_examples=None, max_seconds=None)
    assert info.value.field == "budget"
    assert str(info.value).startswith(
        "budget needs at least one of max_steps, max_examples, max_seconds"
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_steps": 0}, "budget.max_steps must be >= 1 (got 0)"),
        ({"max_examples": 0}, "budget.max_examples must be >= 1 (got 0)"),
        ({"max_seconds": 0.0}, "budget.max_seconds must be > 0 (got 0.0)"),
        ({"max_seconds": float("nan")}, "budget.max_seconds must be > 0 (got nan)"),
    ],
)
def test_budget_limits_must_be_positive(changes: dict, message: str) -> None:
    with pytest.raises(FieldError) as info:
        Budget(**changes)
    assert str(info.value) == message


def test_budget_may_have_no_time_limit() -> None:
    assert Budget(max_steps=None, max_seconds=float("inf")).max_seconds == float("inf")


def test_budget_step_limit() -> None:
    assert Budget(max_steps=100).step_limit(32) == 100
    assert Budget(max_steps=100, max_examples=320).step_limit(32) == 10
    assert Budget(max_steps=None, max_examples=10).step_limit(64) == 1
    assert Budget(max_steps=None, max_seconds=5.0).step_limit(8) is None


# TrialSpec


@pytest.mark.parametrize("batch_size", [0, -8])
def test_batch_size_must_be_positive(batch_size: int) -> None:
    with pytest.raises(FieldError) as info:
        spec(batch_size=batch_size)
    assert str(info.value) == f"batch_size must be >= 1 (got {batch_size})"


@pytest.mark.parametrize("batch_size", [1.5, True])
def test_batch_size_must_be_an_integer(batch_size: object) -> None:
    with pytest.raises(FieldError) as info:
        spec(batch_size=batch_size)
    assert str(info.value) == f"batch_size must be an integer (got {batch_size})"


def test_trial_spec_to_params_is_flat() -> None:
    params = spec(workload_options={"samples": 100}, strategy="mirrored:2").to_params()
    assert params["batch_size"] == 32
    assert params["strategy"] == "mirrored:2"
    assert params["optimizer"] == "nesterov"
    assert params["optimizer.learning_rate"] == 0.05
    assert params["schedule"] == "constant"
    assert params["budget.max_steps"] == 10_000
    assert params["workload.samples"] == 100
    assert params["target"] == "val_accuracy>=0.9"
    assert "budget.max_seconds" not in params  # None values are dropped
    assert all(isinstance(v, (str, int, float)) for v in params.values())


def test_trial_spec_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec().batch_size = 64  # type: ignore[misc]


# TrialSettings


def test_settings_defaults() -> None:
    settings = TrialSettings()
    assert settings.budget == Budget() and settings.cadence == EvalCadence()
    assert (settings.seed, settings.loss, settings.precision, settings.jit_compile) == (
        0,
        None,
        "auto",
        "auto",
    )
    assert (settings.noise_scale, settings.noise_every, settings.exact_steps) == (False, 16, True)
    assert spec().settings == settings


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"seed": -1}, "seed must be >= 0 (got -1)"),
        ({"seed": 1.5}, "seed must be an integer (got 1.5)"),
        ({"noise_every": 0}, "noise_every must be >= 1 (got 0)"),
        ({"noise_every": True}, "noise_every must be an integer (got True)"),
        ({"precision": "fp8"}, "precision: unknown precision 'fp8'; choose from auto, float32, "
         "mixed_float16, mixed_bfloat16"),
        ({"jit_compile": "yes"}, "jit_compile: unknown jit_compile 'yes'; choose from auto, on, "
         "off"),
        ({"noise_scale": 1}, "noise_scale must be true or false (got 1)"),
    ],
)  # fmt: skip
def test_settings_are_checked_once_by_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(FieldError) as info:
        TrialSettings(**changes)  # type: ignore[arg-type]
    assert str(info.value) == message
    assert info.value.field == next(iter(changes))


def test_every_setting_is_logged() -> None:
    params = TrialSettings(noise_scale=True, noise_every=4, loss="mse").to_params()
    assert params == {
        "budget.max_steps": 10_000,
        "budget.max_examples": None,
        "budget.max_seconds": None,
        "eval_cadence": "geometric:1.05",
        "seed": 0,
        "loss": "mse",
        "precision": "auto",
        "jit_compile": "auto",
        "noise_scale": True,
        "noise_every": 4,
        "exact_steps": True,
    }
    assert "noise_every" not in TrialSettings().to_params()  # only where it is measured


def test_with_settings_changes_the_settings_only() -> None:
    base = spec(batch_size=64)
    measured = base.with_settings(noise_scale=True, noise_every=4)
    assert (measured.settings.noise_scale, measured.settings.noise_every) == (True, 4)
    assert dataclasses.replace(measured, settings=base.settings) == base
    assert measured.to_params()["noise_every"] == 4 and "noise_every" not in base.to_params()
    with pytest.raises(FieldError, match="noise_every must be >= 1"):
        base.with_settings(noise_every=0)


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
    with pytest.raises(FieldError) as info:
        EvalCadence.parse(text)
    assert info.value.field == "cadence"
    assert str(info.value).startswith(f"cadence: cannot parse {text.strip()!r}")


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"kind": "fixed", "every": 0}, "cadence.every", "must be >= 1 step (got 0)"),
        ({"ratio": 1.0}, "cadence.ratio", "geometric ratio must be > 1 (got 1.0)"),
        ({"ratio": 0.5}, "cadence.ratio", "geometric ratio must be > 1 (got 0.5)"),
    ],
)
def test_cadence_values_are_validated(changes: dict, field: str, message: str) -> None:
    with pytest.raises(FieldError) as info:
        EvalCadence(**changes)
    assert str(info.value) == f"{field} {message}"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("0", "cadence.every", "must be >= 1 step (got 0)"),
        ("geometric:1.0", "cadence.ratio", "geometric ratio must be > 1 (got 1.0)"),
        ("geometric:0.5", "cadence.ratio", "geometric ratio must be > 1 (got 0.5)"),
    ],
)
def test_cadence_parse_rejects_out_of_range_values(text: str, field: str, message: str) -> None:
    # The rule and the value are named, not a generic "cannot parse".
    with pytest.raises(FieldError) as info:
        EvalCadence.parse(text)
    assert str(info.value) == f"{field} {message}"
    assert str(info.value.named("--eval-every")) == f"--eval-every {message}"


def test_cadence_parse_names_the_option() -> None:
    with pytest.raises(FieldError, match=r"^--eval-every must be >= 1 step \(got 0\)$"):
        EvalCadence.parse("0", option="--eval-every")
    with pytest.raises(FieldError, match=r"^--eval-every: cannot parse 'x'"):
        EvalCadence.parse("x", option="--eval-every")


def test_unknown_cadence_kind() -> None:
    with pytest.raises(FieldError, match=r"^cadence: unknown cadence 'daily'"):
        EvalCadence(kind="daily")
