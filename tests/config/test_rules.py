"""Tests for study.config.rules: the shared interval rules and `FieldError`."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from study.config.rules import FieldError, check, show
from study.errors import UsageError


def test_field_error_names_the_field_or_what_the_caller_calls_it() -> None:
    err = FieldError("optimizer.learning_rate", "must be > 0", -1.0)
    assert isinstance(err, UsageError)
    assert (err.field, err.rule, err.value) == ("optimizer.learning_rate", "must be > 0", -1.0)
    assert str(err) == "optimizer.learning_rate must be > 0 (got -1.0)"
    assert str(err.named("--lr")) == "--lr must be > 0 (got -1.0)"
    named = err.named("s.yaml: search_space.learning_rate.low")
    assert str(named) == "s.yaml: search_space.learning_rate.low must be > 0 (got -1.0)"
    assert (named.field, named.rule, named.value) == (err.field, err.rule, err.value)


def test_field_error_with_the_value_inline() -> None:
    err = FieldError(
        "optimizer", "must be one of sgd, adam", "rmsprop", detail="unknown optimizer 'rmsprop'"
    )
    assert str(err) == "optimizer: unknown optimizer 'rmsprop'"
    assert str(err.named("--optimizer")) == "--optimizer: unknown optimizer 'rmsprop'"
    spaced = FieldError("batch_size", "must be even", 3, detail="3 is odd", sep=" ")
    assert str(spaced.named("--batch-size")) == "--batch-size 3 is odd"


def test_field_error_without_a_value_or_with_its_own_display() -> None:
    assert str(FieldError("budget", "needs a limit")) == "budget needs a limit"
    err = FieldError("x.low", "must be < high", got="low=1.0, high=0.5")
    assert str(err) == "x.low must be < high (got low=1.0, high=0.5)"


def test_field_error_survives_pickling() -> None:
    # Errors may cross into and out of worker processes.
    err = FieldError("strategy", "rule", "warp", detail="unknown strategy 'warp'").named("--s")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is FieldError and str(copy) == str(err) == "--s: unknown strategy 'warp'"
    assert (copy.field, copy.rule, copy.value) == ("strategy", "rule", "warp")
    assert str(pickle.loads(pickle.dumps(FieldError("budget", "needs a limit")))) == (
        "budget needs a limit"
    )


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        ("> 0", [1e-9, 3, np.float32(0.5)], [0, -1, math.inf, math.nan, "1", True, None]),
        (">= 0", [0, 0.0, 5], [-1e-9, math.inf]),
        (">= 1", [1, 100], [0, 0.5]),
        ("[0, 1)", [0, 0.99], [1, 1.0, -0.1, math.nan]),
        ("[0, 1]", [0, 1, 1.0], [1.01, -0.1]),
    ],
)
def test_check(rule: str, good: list, bad: list) -> None:
    for value in good:
        check("f", value, rule)
    for value in bad:
        with pytest.raises(FieldError) as info:
            check("f", value, rule)
        described = f"in {rule}" if rule.startswith("[") else rule
        assert str(info.value) == f"f must be {described} (got {show(value)})"


def test_check_units_and_infinity() -> None:
    with pytest.raises(FieldError, match=r"^w must be >= 0 steps \(got -1\)$"):
        check("w", -1, ">= 0", unit="steps")
    check("s", math.inf, "> 0", finite=False)
    with pytest.raises(FieldError):
        check("s", math.nan, "> 0", finite=False)


def test_show() -> None:
    assert show("a") == "'a'"
    assert show(None) == "null"
    assert show({"low": 5, "high": None}) == "{low: 5, high: null}"
    assert show(np.float64(0.5)) == "0.5"
    assert show([1, "x"]) == "[1, 'x']"
