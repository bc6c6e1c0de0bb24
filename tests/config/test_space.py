"""Tests for study.config.space: strata and the params validating themselves."""

from __future__ import annotations

import pytest

from study.config.rules import FieldError
from study.config.space import CategoricalParam, FloatParam, IntParam, SearchSpace, Stratum
from study.errors import UsageError


def test_stratum_round_trips() -> None:
    assert str(Stratum(128, "mirrored:2")) == "b128/mirrored:2"
    assert Stratum.parse("b128/mirrored:2") == Stratum(128, "mirrored:2")
    with pytest.raises(ValueError, match="not a stratum"):
        Stratum.parse("128/default")


@pytest.mark.parametrize(
    ("make", "field", "message"),
    [
        (lambda: FloatParam("x", 1.0, 0.5), "x.low", "x.low must be < high; swap them"),
        (
            lambda: FloatParam("momentum", 0.9, 0.9),
            "momentum.low",
            "momentum.low must be < high; to hold momentum fixed write {choices: [0.9]}",
        ),
        (
            lambda: FloatParam("learning_rate", 0.1, 0.1),
            "learning_rate.low",
            "learning_rate.low must be < high; give a range",
        ),
        (
            lambda: IntParam("x", 0, 5, log=True),
            "x.low",
            "x.low must be > 0 with scale log (use scale: linear to include 0) (got 0)",
        ),
        (lambda: FloatParam("learning_rate", -1, 1.0), "learning_rate.low", "must be > 0 (got -1)"),
        (lambda: FloatParam("beta1", 0.5, 1.0), "beta1.high", "must be in [0, 1) (got 1.0)"),
        (lambda: IntParam("decay_steps", 0, 9), "decay_steps.low", "must be >= 1 (got 0)"),
        (
            lambda: CategoricalParam("schedule", ("constant", "step")),
            "schedule.choices[1]",
            "must be one of constant, linear, cosine (got 'step')",
        ),
        (
            lambda: CategoricalParam("warmup_steps", (0, -1)),
            "warmup_steps.choices[1]",
            "must be >= 0 (got -1)",
        ),
        (lambda: CategoricalParam("x", ()), "x.choices", "must be a non-empty list (got [])"),
    ],
)
def test_params_validate_themselves(make, field: str, message: str) -> None:
    with pytest.raises(FieldError) as info:
        make()
    assert info.value.field == field
    assert message in str(info.value)


def test_params_have_their_types() -> None:
    assert FloatParam("learning_rate", 1, 10).low == 1.0
    assert isinstance(FloatParam("learning_rate", 1, 10).low, float)
    assert CategoricalParam("weight_decay", (0, 1e-4)).choices == (0.0, 1e-4)
    assert isinstance(CategoricalParam("weight_decay", (0, 1e-4)).choices[0], float)
    assert CategoricalParam("warmup_steps", (0, 100)).choices == (0, 100)
    assert CategoricalParam("custom", ("a", 1)).choices == ("a", 1)  # unknown names: as given


def test_search_space() -> None:
    lr = FloatParam("learning_rate", 1e-3, 1.0, log=True)
    space = SearchSpace((8, 32), ("default", "mirrored:2"), (lr,))
    assert space.strata() == [
        Stratum(8, "default"),
        Stratum(8, "mirrored:2"),
        Stratum(32, "default"),
        Stratum(32, "mirrored:2"),
    ]
    assert space.param("learning_rate") is lr
    with pytest.raises(UsageError, match="unknown search-space parameter 'momentum'"):
        space.param("momentum")
    with pytest.raises(UsageError, match=r"first parameter .* must be learning_rate"):
        SearchSpace((8,), ("default",), (CategoricalParam("momentum", (0.9,)),))
