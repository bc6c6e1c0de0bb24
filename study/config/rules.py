"""Value rules, written once, and the error that says which field broke one.

The data model (`TrialSpec` and its parts, the search-space params, `Target`, `StrategySpec`,
the workload registry) checks values with `check` and raises `FieldError`: the field, the rule
and the value, without knowing where the value came from. The front end names the field:
``study train`` by its flag, the study-file parser by file and key::

    err = FieldError("optimizer.learning_rate", "must be > 0", -1.0)
    str(err)                                    # optimizer.learning_rate must be > 0 (got -1.0)
    str(err.named("--lr"))                      # --lr must be > 0 (got -1.0)
    str(err.named("s.yaml: search_space.learning_rate.low"))
    # s.yaml: search_space.learning_rate.low must be > 0 (got -1.0)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from study.errors import UsageError

__all__ = ["RULES", "FieldError", "check", "describe", "show"]

#: Interval rules by name, as predicates.
RULES: dict[str, Callable[[float], bool]] = {
    "> 0": lambda v: v > 0,
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "[0, 1)": lambda v: 0 <= v < 1,
    "[0, 1]": lambda v: 0 <= v <= 1,
}


class FieldError(UsageError):
    """A value of one field of the data model breaks a rule; the front end names the field.

    ``field`` is the data-model name (``batch_size``, ``optimizer.learning_rate``, ``cadence``),
    ``rule`` what a good value looks like and ``value`` the bad one (``...`` when the rule says it
    all). The message is ``NAME RULE (got VALUE)``, the study-file style. When the problem reads
    better with the value inline, ``detail`` gives it as ``NAME: DETAIL`` (``sep`` replaces the
    ``": "``), e.g. ``--optimizer: unknown optimizer 'rmsprop'; choose from ...``.

    Args:
        got: shows the value this way instead of `show(value)` (e.g. ``low=1.0, high=0.5``).
        name: what the message calls the field (default: ``field``); see `named`.
    """

    def __init__(
        self,
        field: str,
        rule: str,
        value: Any = ...,
        *,
        detail: str | None = None,
        sep: str = ": ",
        got: str | None = None,
        name: str | None = None,
    ) -> None:
        self.field, self.rule, self.value = field, rule, value
        self.detail, self.sep = detail, sep
        self.got = got if got is not None or value is ... else show(value)
        self.name = name or field
        super().__init__(self.message(self.name))

    def message(self, name: str) -> str:
        """The message with the field called ``name``."""
        if self.detail is not None:
            return f"{name}{self.sep}{self.detail}"
        tail = f" (got {self.got})" if self.got is not None else ""
        return f"{name} {self.rule}{tail}"

    def named(self, name: str) -> FieldError:
        """The same error, its message calling the field ``name`` (a flag, or ``FILE: key``)."""
        return FieldError(self.field, self.rule, self.value, name=name, **self._options())

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across worker processes
        return (_rebuild, (self.field, self.rule, self.value, self.name, self._options()))

    def _options(self) -> dict[str, Any]:
        return {"detail": self.detail, "sep": self.sep, "got": self.got}


def _rebuild(field: str, rule: str, value: Any, name: str, options: dict[str, Any]) -> FieldError:
    return FieldError(field, rule, value, name=name, **options)


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


def show(value: Any) -> str:
    """A value as messages show it: strings quoted, mappings as ``{key: value}``, None as null."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    if isinstance(value, numbers.Number):
        return str(value)  # 0.5, not np.float64(0.5)
    return repr(value).replace("\n", " ")
