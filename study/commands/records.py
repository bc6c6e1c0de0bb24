"""Records of the data model read from parsed flags: each field from the flag of its name.

from_flags(BranchOptions, args)   # storage=args.storage, workers=args.workers, ...
from_flags(OptimizerSpec, args, name="optimizer", learning_rate="lr")
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

__all__ = ["from_flags"]

R = TypeVar("R")


def from_flags(record: type[R], args: argparse.Namespace, **flags: str) -> R:
    """``record`` (a dataclass) with each field set from the parsed flag of its name;
    ``flags`` names a field's flag where it has another (``learning_rate="lr"``: ``--lr``).
    A field the command has no flag for keeps its default.

    Raises:
        FieldError: a value the record refuses (`study.commands.flags.in_flags` names its flag).
        TypeError: ``flags`` names a field the record does not have.
    """
    fields = [f for f in dataclasses.fields(record) if f.init]  # type: ignore[arg-type]
    unknown = set(flags) - {f.name for f in fields}
    if unknown:
        raise TypeError(f"{record.__name__} has no field {sorted(unknown)[0]!r}")
    values: dict[str, Any] = {}
    for field in fields:
        dest = flags.get(field.name, field.name)
        if hasattr(args, dest):
            values[field.name] = getattr(args, dest)
    return record(**values)
