"""Workload options: declared once per workload, checked by the base class, errors name the option.

A workload declares ``option_specs``, a mapping of option name to `Option`: its default and a
check that turns the given value (from a study file, or ``KEY=VALUE`` text on the command line)
into the value the workload uses. `study.workloads.base.Workload.__init__` fills in the
defaults, runs every check (on defaults too) and refuses unknown names; the workload reads its
options as ``self.options["name"]``. Every check raises `FieldError` on the option's name, so
the front end can call it what the user wrote (a flag, or a study file's key)::

    class Blobs(Workload):
        option_specs = {"samples": Option(5000, integer(minimum=100)), "seed": Option(0, integer())}

    Blobs(samples="2000").options["samples"]    # 2000
    Blobs(samples=5)     # FieldError: workload option 'samples' must be an integer >= 100 (got 5)
    Blobs(colour="red")  # FieldError: workload 'blobs' takes no option 'colour'; its options
                         # are samples, seed
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from study.errors import FieldError
from study.workloads.task import TaskKind

__all__ = [
    "Check",
    "Option",
    "bool_option",
    "boolean",
    "choice",
    "float_option",
    "int_option",
    "integer",
    "number",
    "option_error",
    "resolve_options",
    "task_option",
    "tasks",
    "text",
    "text_option",
    "unknown_option",
]

#: A check: ``check(name, value)`` returns the value to use, or raises `FieldError` on ``name``.
Check = Callable[[str, Any], Any]


@dataclass(frozen=True)
class Option:
    """One workload option: its ``default`` and the ``check`` every value goes through.

    Without a check the value is taken as given. A check sees the default too (so a default of
    None must be one it accepts, meaning "not given").
    """

    default: Any = None
    check: Check | None = None

    def value(self, name: str, given: Any) -> Any:
        return given if self.check is None else self.check(name, given)


def option_error(
    name: str, rule: str, value: Any = ..., *, detail: str | None = None
) -> FieldError:
    """`FieldError` on option ``name``, worded "workload option 'NAME' RULE (got VALUE)" (or
    "workload option 'NAME': DETAIL") until the front end names the option its own way."""
    return FieldError(name, rule, value, detail=detail, name=f"workload option {name!r}")


def resolve_options(
    workload: str, specs: Mapping[str, Option], given: Mapping[str, Any]
) -> dict[str, Any]:
    """Every declared option's checked value: ``given``'s, else the default.

    Raises:
        FieldError: on ``workload_options`` for a name not declared ("workload 'tiny' takes no
            option 'colour'; its options are size"), or on the option a check refuses.
    """
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise unknown_option(workload, unknown[0], list(specs))
    return {name: spec.value(name, given.get(name, spec.default)) for name, spec in specs.items()}


def unknown_option(workload: str, option: str, known: Sequence[str]) -> FieldError:
    """The error of an option ``workload`` does not take, listing those it does."""
    problem = f"takes no option {option!r}; its options are {', '.join(known) or 'none'}"
    name = f"workload {workload!r}"
    return FieldError("workload_options", problem, option, detail=problem, sep=" ", name=name)


# -- checks: functions of (name, value), and factories of them for `Option` ---------------------


def int_option(name: str, value: Any, *, minimum: int) -> int:
    """Return ``value`` as an int >= ``minimum`` (integral floats and digit strings accepted).

    Raises:
        FieldError: e.g. "workload option 'samples' must be an integer >= 100 (got 'abc')".
    """
    result: int | None = None
    if isinstance(value, bool):
        result = None
    elif isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            result = None
    if result is None or result < minimum:
        raise option_error(name, f"must be an integer >= {minimum}", value)
    return result


def float_option(name: str, value: Any, *, low: float, high: float) -> float:
    """Return ``value`` as a float strictly between ``low`` and ``high``.

    Raises:
        FieldError: e.g. "workload option 'val_fraction' must be a number in (0, 1) (got 2)".
    """
    result: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            result = None
    if result is None or not low < result < high:
        raise option_error(name, f"must be a number in ({low:g}, {high:g})", value)
    return result


def bool_option(name: str, value: Any) -> bool:
    """``value`` as a bool: True/False, 1/0 or the words true/false, yes/no, on/off.

    Raises:
        FieldError: e.g. "workload option 'streamed' must be true or false (got 'maybe')".
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("true", "yes", "on", "1"):
            return True
        if word in ("false", "no", "off", "0"):
            return False
    raise option_error(name, "must be true or false", value)


def text_option(name: str, value: Any, what: str) -> str | None:
    """A path or column name as a string (numbers too: CSV headers are text); None stays None.

    Raises:
        FieldError: e.g. "workload option 'label': expected a column name (got an empty string)".
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float, os.PathLike)):
        raise option_error(
            name, f"must be {what}", value, detail=f"expected {what} (got {value!r})"
        )
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if not text.strip():
        raise option_error(
            name, f"must be {what}", value, detail=f"expected {what} (got an empty string)"
        )
    return text


def task_option(value: Any, allowed: Sequence[TaskKind], *, name: str = "task") -> TaskKind:
    """The task kind named by option ``task``, one of ``allowed``.

    Raises:
        FieldError: "workload option 'task' must be one of multiclass, binary (got 'regression')".
    """
    names = [kind.value for kind in allowed]
    text = value.value if isinstance(value, TaskKind) else value
    if not isinstance(text, str) or text.strip().lower() not in names:
        raise option_error(name, f"must be one of {', '.join(names)}", value)
    return TaskKind(text.strip().lower())


def integer(*, minimum: int = 0) -> Check:
    """A check for an integer >= ``minimum``."""
    return lambda name, value: int_option(name, value, minimum=minimum)


def number(*, low: float, high: float) -> Check:
    """A check for a number strictly between ``low`` and ``high``."""
    return lambda name, value: float_option(name, value, low=low, high=high)


def boolean(*, optional: bool = False) -> Check:
    """A check for true or false (``optional``: None too, meaning "decide for me")."""
    return lambda name, value: None if optional and value is None else bool_option(name, value)


def choice(*choices: str, optional: bool = False) -> Check:
    """A check for one of ``choices`` (``optional``: None too)."""

    def check(name: str, value: Any) -> str | None:
        if optional and value is None:
            return None
        if value not in choices:
            raise option_error(name, f"must be one of {', '.join(choices)}", value)
        return str(value)

    return check


def text(what: str) -> Check:
    """A check for a path or a name (``what``, e.g. "a column name"), None meaning not given."""
    return lambda name, value: text_option(name, value, what)


def tasks(*allowed: TaskKind) -> Check:
    """A check for option ``task``: one of ``allowed`` (default: every kind), kept as its name."""
    kinds = allowed or tuple(TaskKind)
    return lambda name, value: task_option(value, kinds, name=name).value
