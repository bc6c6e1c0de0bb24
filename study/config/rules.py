"""Value rules, written once.

The data model (`TrialSpec` and its parts, the search-space params, `Target`) checks values with
`check` and raises `study.errors.FieldError` (re-exported here): the field, the rule and the
value, without knowing where the value came from. The front end names the field: ``study
train`` by its flag, the study-file parser by file and key::

    err = FieldError("optimizer.learning_rate", "must be > 0", -1.0)
    str(err)                                    # optimizer.learning_rate must be > 0 (got -1.0)
    str(err.named("--lr"))                      # --lr must be > 0 (got -1.0)
    str(err.named("s.yaml: search_space.learning_rate.low"))
    # s.yaml: search_space.learning_rate.low must be > 0 (got -1.0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from study.errors import FieldError, show

__all__ = ["RULES", "FieldError", "check", "describe", "show"]

#: Interval rules by name, as predicates.
RULES: dict[str, Callable[[float], bool]] = {
    "> 0": lambda v: v > 0,
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "[0, 1)": lambda v: 0 <= v < 1,
    "[0, 1]": lambda v: 0 <= v <= 1,
}


def check(field: str, value: Any, rule: str, *, unit: str = "", finite: bool = True) -> None:
    """Raise `FieldError` unless ``value`` is a number that obeys ``rule`` (and is finite).

    Example: ``check("optimizer.momentum", 1.0, "[0, 1)")`` raises
    "optimizer.momentum must be in [0, 1) (got 1.0)"; with ``unit="steps"`` the rule reads
    "must be >= 0 steps". ``finite=False`` lets infinity through where the rule allows it.
    """
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if number and (not finite or math.isfinite(value)) and RULES[rule](value):
        return
    raise FieldError(field, f"must be {describe(rule)}" + (f" {unit}" if unit else ""), value)


def describe(rule: str) -> str:
    """A rule as the messages word it: ``> 0`` stays, ``[0, 1)`` reads ``in [0, 1)``."""
    return f"in {rule}" if rule.startswith("[") else rule
