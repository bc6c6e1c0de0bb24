"""Workload registry: built-in names map to ``module:class`` strings, imported only when asked for.

Importing this package is cheap (no TensorFlow, Keras, scikit-learn or mnist1d). A name that
cannot be resolved raises `FieldError` on field ``workload``; the caller names it (by its flag
on the command line, as the ``workload`` key of a study file).

Example: ``get_workload("mnist1d", {"samples": 2000})`` imports ``study.workloads.mnist1d`` and
returns ``Mnist1DWorkload(samples=2000)``; ``get_workload("my_pkg.tasks:make_task")`` calls a
custom factory (or `Workload` subclass) with the options as keyword arguments.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from study.errors import FieldError
from study.importing import import_callable
from study.workloads.base import Dataset, Workload
from study.workloads.options import Option, float_option, int_option, unknown_option

__all__ = [
    "Dataset",
    "Option",
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
        FieldError: ``workload``: unknown name, custom import failure, not a workload;
            ``workload_options``: an option it does not take; the option's name (e.g.
            ``samples``): a value its check refuses.
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
    try:
        workload = target(**options)
    except FieldError as err:  # the class's own name for it may differ from the spec's
        if err.field != "workload_options" or err.name == f"workload {name!r}":
            raise
        raise err.named(f"workload {name!r}") from None
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
    expected = "a Workload subclass or a factory returning one"
    return import_callable(spec, field="workload", expected=expected)


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
            raise unknown_option(name, unknown[0], known) from None
        problem = f"cannot take these options ({exc}); its options are {', '.join(known)}"
        raise FieldError(
            "workload_options", problem, detail=problem, sep=" ", name=f"workload {name!r}"
        ) from None
