"""Workload registry: built-in names map to ``module:class`` strings, imported only when asked for.

Importing this package is cheap (no TensorFlow, Keras, scikit-learn or mnist1d). A name that
cannot be resolved raises `FieldError` on field ``workload``; the caller names it (``--workload``
on the command line, the ``workload`` key of a study file).

Example: ``get_workload("mnist1d", {"samples": 2000})`` imports ``study.workloads.mnist1d`` and
returns ``Mnist1DWorkload(samples=2000)``; ``get_workload("my_pkg.tasks:make_task")`` calls a
custom factory (or `Workload` subclass) with the options as keyword arguments.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from study.config.rules import FieldError
from study.errors import UsageError
from study.workloads.base import Dataset, Workload

__all__ = [
    "Dataset",
    "Workload",
    "available",
    "float_option",
    "get_workload",
    "int_option",
]

_BUILTIN: dict[str, str] = {
    "csv": "study.workloads.csv:CsvWorkload",
    "digits": "study.workloads.digits:DigitsWorkload",
    "images": "study.workloads.images:ImagesWorkload",
    "mnist1d": "study.workloads.mnist1d:Mnist1DWorkload",
    "shapes": "study.workloads.shapes:ShapesWorkload",
    "tabular": "study.workloads.tabular:TabularWorkload",
    "tfrecord": "study.workloads.tfrecord:TfrecordWorkload",
}


def available() -> list[str]:
    """The built-in workload names, sorted."""
    return sorted(_BUILTIN)


def get_workload(name: str, options: Mapping[str, Any] | None = None) -> Workload:
    """Instantiate a built-in workload by name, or a custom one given as ``module:callable``.

    Args:
        name: a name from `available()`, or ``module:callable`` where the callable is a
            `Workload` subclass or a factory returning a `Workload` instance.
        options: keyword arguments for the workload.

    Raises:
        FieldError: ``workload``: unknown name, custom import failure, not a workload.
        UsageError: unknown option, or bad option value.
    """
    options = dict(options or {})
    if ":" in name:
        target = _import_custom(name)
    elif name in _BUILTIN:
        module_name, _, attr = _BUILTIN[name].partition(":")
        target = getattr(importlib.import_module(module_name), attr)
    else:
        choices = f"{', '.join(available())}, or give module:callable"
        raise _workload_error(name, f"unknown workload {name!r}; choose from {choices}")
    _check_options(name, target, options)
    workload = target(**options)
    if not isinstance(workload, Workload):
        raise _workload_error(
            name,
            f"{name!r} returned {type(workload).__name__}, not a "
            "study.workloads.Workload; return an instance of a Workload subclass",
        )
    return workload


def _workload_error(spec: str, problem: str) -> FieldError:
    """Field ``workload`` is wrong; ``problem`` says how, naming the value."""
    return FieldError("workload", problem, spec, detail=problem)


def _import_custom(spec: str) -> Callable[..., Any]:
    """Resolve ``module:attr`` (``attr`` may be dotted) to a callable."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise _workload_error(spec, f"expected module:callable (got {spec!r})")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any failure while importing user code is a usage problem
        raise _workload_error(
            spec,
            f"cannot import module {module_name!r} ({type(exc).__name__}: {exc}); "
            "check the name and that it is on PYTHONPATH",
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _workload_error(
                spec,
                f"module {module_name!r} has no attribute {attr!r}; "
                "check the spelling after the ':'",
            ) from None
    if not callable(obj):
        raise _workload_error(
            spec,
            f"{spec!r} is not callable (got {type(obj).__name__}); "
            "give a Workload subclass or a factory returning one",
        )
    return obj


def _check_options(name: str, target: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Fail with the accepted option names when ``target`` cannot take ``options``."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # builtins and C callables: let the call decide
        return
    try:
        signature.bind(**options)
    except TypeError as exc:
        params = signature.parameters.values()
        known = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        unknown = sorted(set(options) - set(known))
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in params):
            problem = f"takes no option {unknown[0]!r}"
        else:
            problem = f"cannot take these options ({exc})"
        raise UsageError(
            f"workload {name!r} {problem}; its options are {', '.join(known) or 'none'}"
        ) from None


def int_option(name: str, value: Any, *, minimum: int) -> int:
    """Return ``value`` as an int >= ``minimum`` (integral floats and digit strings accepted).

    Raises:
        UsageError: e.g. "workload option 'samples' must be an integer >= 100 (got 'abc')".
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
        raise UsageError(
            f"workload option {name!r} must be an integer >= {minimum} (got {value!r})"
        )
    return result


def float_option(name: str, value: Any, *, low: float, high: float) -> float:
    """Return ``value`` as a float strictly between ``low`` and ``high``.

    Raises:
        UsageError: e.g. "workload option 'val_fraction' must be a number in (0, 1) (got 2)".
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
        raise UsageError(
            f"workload option {name!r} must be a number in ({low:g}, {high:g}) (got {value!r})"
        )
    return result
