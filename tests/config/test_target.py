"""Tests for study.config.target."""

from __future__ import annotations

import math

import pytest

from study.config.rules import FieldError
from study.config.target import Target
from study.errors import UsageError


@pytest.mark.parametrize(
    ("text", "metric", "op", "threshold", "maximize"),
    [
        ("val_accuracy>=0.9", "val_accuracy", ">=", 0.9, True),
        ("val_accuracy>0.9", "val_accuracy", ">", 0.9, True),
        ("val_loss<=0.3", "val_loss", "<=", 0.3, False),
        ("val_loss<0.3", "val_loss", "<", 0.3, False),
        ("val/classification_error<0.1", "val/classification_error", "<", 0.1, False),
        ("  val.top-1 >= 1e-2  ", "val.top-1", ">=", 0.01, True),
        ("val_loss<=-2", "val_loss", "<=", -2.0, False),
        ("val_accuracy>=inf", "val_accuracy", ">=", math.inf, True),
    ],
)
def test_parse(text: str, metric: str, op: str, threshold: float, maximize: bool) -> None:
    target = Target.parse(text)
    assert (target.metric, target.op, target.threshold) == (metric, op, threshold)
    assert target.maximize is maximize


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("acc>=0.9", 0.9, True),
        ("acc>=0.9", 0.89, False),
        ("acc>0.9", 0.9, False),
        ("acc>0.9", 0.91, True),
        ("loss<=0.3", 0.3, True),
        ("loss<=0.3", 0.31, False),
        ("loss<0.3", 0.3, False),
        ("loss<0.3", 0.29, True),
        ("loss<0.3", math.nan, False),
        ("loss<0.3", None, False),
    ],
)
def test_holds(text: str, value: float, expected: bool) -> None:
    assert Target.parse(text).holds(value) is expected


def test_met_by_needs_the_metric() -> None:
    target = Target.parse("val/classification_error<0.1")
    assert target.met_by({"val/classification_error": 0.05})
    assert not target.met_by({"val_accuracy": 0.99})
    assert not target.met_by({"val/classification_error": 0.2})


def test_str_round_trips() -> None:
    for text in ("val_accuracy>=0.9", "val/classification_error<0.1", "val_loss<=0.25"):
        assert str(Target.parse(text)) == text
        assert Target.parse(str(Target.parse(text))) == Target.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "val_accuracy",
        ">=0.9",
        "val_accuracy>=",
        "val_accuracy==0.9",
        "val_accuracy=>0.9",
        "val_accuracy>=abc",
        "val_accuracy>=nan",
        "1acc>=0.9",
        "val accuracy>=0.9",
        "",
    ],
)
def test_malformed_raises_usage_error_naming_value(text: str) -> None:
    with pytest.raises(UsageError) as info:
        Target.parse(text)
    message = str(info.value)
    assert message.startswith("target: cannot parse")
    assert repr(text) in message
    assert "\n" not in message
    assert isinstance(info.value, FieldError)
    assert (info.value.field, info.value.value) == ("target", text)


def test_threshold_that_is_not_a_number() -> None:
    with pytest.raises(FieldError, match=r"threshold '1\.2\.3' in 'acc>=1\.2\.3' is not a number"):
        Target.parse("acc>=1.2.3")


def test_option_name_appears_in_message() -> None:
    with pytest.raises(UsageError, match=r"^study\.yaml: target: cannot parse 'oops'"):
        Target.parse("oops", option="study.yaml: target")
    with pytest.raises(UsageError, match=r"^--target: cannot parse 'oops'; write METRIC OP NUMBER"):
        Target.parse("oops", option="--target")


def test_is_frozen() -> None:
    target = Target.parse("acc>=0.5")
    with pytest.raises(AttributeError):
        target.threshold = 0.6  # type: ignore[misc]
