"""The tfrecord workload's feature spec: ``dtype[dims]`` text read into `FeatureSpec`, and the
label's spec checked against the task (no TensorFlow).

Every problem is a one-line `FieldError` on the option it is about: ``features`` (a spec that
does not parse) or ``label`` (a label whose dtype or shape does not suit the task). Example::

    parse_features("x:float32[4], img:float32[28,28,1];y=int64[]")
    # -> (FeatureSpec("x", "float32", (4,)), FeatureSpec("img", "float32", (28, 28, 1)),
    #     FeatureSpec("y", "int64", ()))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from study.workloads.options import option_error
from study.workloads.task import TaskKind

__all__ = ["FeatureSpec", "check_label", "parse_features", "parse_spec"]

_SPEC = re.compile(r"(float32|int64)\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]")
_ENTRY = re.compile(r"\s*([A-Za-z_][\w.\-/]*)\s*[:=]\s*([a-z0-9]+\[[^\]]*\])\s*(?:[,;]|$)")


@dataclass(frozen=True)
class FeatureSpec:
    """One fixed-length feature: ``float32[40]`` is dtype float32, shape (40,)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def parse_spec(name: str, text: Any) -> FeatureSpec:
    """``float32[40]`` -> FeatureSpec(name, "float32", (40,)).

    Raises:
        FieldError: "workload option 'features': feature 'x' must be float32[dims] or
            int64[dims], e.g. float32[40] or int64[] (got 'float[40]')".
    """
    match = _SPEC.fullmatch(text.strip()) if isinstance(text, str) else None
    shape = tuple(int(d) for d in match.group(2).split(",")) if match and match.group(2) else ()
    if match is None or any(d < 1 for d in shape):
        raise option_error(
            "features",
            "",
            detail=f"feature {name!r} must be float32[dims] or "
            f"int64[dims], e.g. float32[40] or int64[] (got {text!r})",
        )
    return FeatureSpec(name, match.group(1), shape)


def parse_features(value: Any) -> tuple[FeatureSpec, ...]:
    """A mapping ``{name: spec}``, or the text ``name:spec,name:spec`` (command line).

    Raises:
        FieldError: on option ``features``.
    """
    if isinstance(value, str):
        entries, end = [], 0
        for match in _ENTRY.finditer(value):
            if match.start() != end:
                break
            entries.append((match.group(1), match.group(2)))
            end = match.end()
        if end != len(value) or not entries:
            raise option_error(
                "features",
                "",
                detail="expected name:dtype[dims] pairs separated by "
                f"commas, e.g. x:float32[40],y:int64[] (got {value!r})",
            )
        if len({n for n, _ in entries}) != len(entries):
            raise option_error("features", "", detail=f"a feature is named twice in {value!r}")
        value = dict(entries)
    if not isinstance(value, Mapping) or not value:
        raise option_error(
            "features",
            "",
            detail="give a mapping of feature name to dtype[dims], "
            f"e.g. {{x: float32[40], y: int64[]}} (got {value!r})",
        )
    return tuple(parse_spec(str(name), spec) for name, spec in value.items())


def check_label(label: FeatureSpec, kind: TaskKind) -> None:
    """The label's spec suits the task (a class id is an int64 scalar, ...).

    Raises:
        FieldError: on option ``label``, e.g. "workload option 'label': task multiclass needs
            an int64[] class id; feature 'x' is float32[4]".
    """
    need = {
        TaskKind.MULTICLASS: ("an int64[] class id", label.dtype == "int64" and not label.shape),
        TaskKind.BINARY: ("a 0/1 scalar (int64[] or float32[])", not label.shape),
        TaskKind.MULTILABEL: ("a vector of 0/1 like int64[5]", len(label.shape) == 1),
        TaskKind.REGRESSION: (
            "a number or vector like float32[] or float32[3]",
            len(label.shape) <= 1,
        ),
    }
    what, ok = need[kind]
    if not ok:
        raise option_error(
            "label",
            f"must be {what}",
            detail=f"task {kind.value} needs {what}; feature {label.name!r} is {label}",
        )
