"""`from_flags`: a record's fields read from parsed flags."""

from __future__ import annotations

import argparse

import pytest

from study.commands.records import from_flags
from study.config.rules import FieldError
from study.config.trial import OptimizerSpec, ScheduleSpec


def test_each_field_comes_from_its_flag_and_a_renamed_one_from_the_flag_named() -> None:
    args = argparse.Namespace(
        optimizer="adam", lr=0.05, momentum=0.8, beta1=0.5, beta2=0.99, epsilon=1e-6,
        weight_decay=0.1, unrelated="x",
    )  # fmt: skip

    spec = from_flags(OptimizerSpec, args, name="optimizer", learning_rate="lr")

    assert spec == OptimizerSpec("adam", 0.05, 0.8, 0.5, 0.99, 1e-6, 0.1)


def test_a_field_without_a_flag_keeps_its_default() -> None:
    spec = from_flags(ScheduleSpec, argparse.Namespace(warmup=7), warmup_steps="warmup")

    assert spec == ScheduleSpec(warmup_steps=7)


def test_a_value_the_record_refuses_is_an_error_on_its_field() -> None:
    with pytest.raises(FieldError) as caught:
        from_flags(OptimizerSpec, argparse.Namespace(lr=-1.0), learning_rate="lr")

    assert caught.value.field == "optimizer.learning_rate"


def test_renaming_a_field_the_record_does_not_have_is_refused() -> None:
    with pytest.raises(TypeError, match="OptimizerSpec has no field 'rate'"):
        from_flags(OptimizerSpec, argparse.Namespace(lr=0.1), rate="lr")
