"""The Python API's arguments: checked up front, errors named by the argument.

The layers below raise `FieldError` on a data-model field (``optimizer.learning_rate``,
``budget.max_steps``); the API calls it by the keyword argument that sets it
(``learning_rate``, ``max_steps``), as the CLI calls it by its flag::

    argument_of("optimizer.learning_rate")      # 'learning_rate'
    argument_of("workload_options.path")        # "workload_options['path']"
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import fields
from typing import Any

from study.config.definition import TrialDefinition, field_paths
from study.errors import FieldError, UsageError

#: The keyword argument of `study.train` that sets each data-model field whose name differs
#: from it (``optimizer.learning_rate``: ``learning_rate``): the fields of `TrialDefinition`.
ARGUMENTS: dict[str, str] = {
    **{
        path: item.name
        for item in fields(TrialDefinition)
        for path in field_paths(item)
        if path != item.name
    },
    "targets": "levels",
}
_OPTIONS = "workload_options."
_FIELD = re.compile(r"^([A-Za-z_][\w.\[\]]*)(: | )(.*)$", re.DOTALL)


def argument_of(field: str) -> str:
    """The keyword argument that sets ``field``."""
    if field.startswith(_OPTIONS):
        return f"workload_options[{field.removeprefix(_OPTIONS)!r}]"
    return ARGUMENTS.get(field, field)


def in_arguments(exc: UsageError) -> UsageError:
    """``exc`` named by its argument when it is a `FieldError` not yet named."""
    if isinstance(exc, FieldError) and exc.name == exc.field:
        return exc.named(argument_of(exc.field))
    return exc


def problem_in_arguments(problem: str) -> str:
    """A worker's one-line problem (``workload_options.path: cannot read ...``), starting with
    its argument instead of its field."""
    match = _FIELD.match(problem)
    if match is None:
        return problem
    return f"{argument_of(match.group(1))}{match.group(2)}{match.group(3)}"


def positive_int(name: str, value: Any, *, optional: bool = False) -> int | None:
    """``value`` if it is an integer >= 1 (or None when ``optional``), else a `FieldError`
    on ``name``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FieldError(name, "must be an integer >= 1", value)
    return value


def level(name: str, value: Any) -> float:
    """A confidence level strictly between 0 and 1, else a `FieldError` on ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise FieldError(name, "must be a level between 0 and 1, e.g. 0.9", value)
    return float(value)


def one_of(name: str, value: Any, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``, else a `FieldError` on ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise FieldError(name, f"must be one of {', '.join(map(repr, choices))}", value)
    return value


def text(name: str, value: Any, *, optional: bool = False) -> str | None:
    """``value`` as a string (a path-like is turned into one), or None when ``optional``; any
    other type is a `FieldError` on ``name``."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        return os.fspath(value)  # type: ignore[return-value]
    if not isinstance(value, str) or not value:
        kind = "a string or a path" if optional else "a non-empty string"
        raise FieldError(name, f"must be {kind}", value)
    return value
