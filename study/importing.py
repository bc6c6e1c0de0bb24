"""The one importer of the user's ``module:callable`` specs (a workload, a model, a loss).

Every way a spec can be wrong is a `FieldError` on the field that holds it (``workload``,
``model``, ``loss``); the front end names the field (``--model`` on the command line,
``FILE: model`` in a study file). Example::

    import_callable("my_models:small_cnn", field="model")   # the function my_models.small_cnn
    import_callable("my_models", field="model")
    # FieldError: model: expected module:callable (got 'my_models')

`split_spec` and `find_module` check a spec without running the user's module (no TensorFlow
is imported in the CLI process).

The user's modules are found as ``python -m``, pytest and uvicorn find them: the working
directory comes first on the module path (`working_directory_first`), then ``PYTHONPATH`` and
the installed packages. So ``study check-workload my_digits:Digits`` works in the folder that
holds ``my_digits.py``, and so does every trainer worker of a study run there (`multiprocessing`
starts it in the caller's folder with the caller's module path).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from study.errors import FieldError

__all__ = ["find_module", "import_callable", "is_spec", "split_spec", "working_directory_first"]


def is_spec(value: str) -> bool:
    """Whether ``value`` is meant as ``module:callable`` (it has a ``:``) rather than a name."""
    return ":" in value


def split_spec(spec: str, *, field: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``module:attribute``; the attribute may be dotted.

    Raises:
        FieldError: on ``field``: "expected module:callable (got 'x')".
    """
    module, _, attr = spec.partition(":")
    if not module.strip() or not attr.strip():
        raise _error(field, spec, f"expected module:callable (got {spec!r})")
    return module, attr


def working_directory_first() -> None:
    """Put the working directory first on ``sys.path`` unless it is on it already (``""`` or
    its path, as ``python -m`` and ``python -c`` put it), so that a user's module beside them
    imports; it stays there for the process (the module may import its neighbours later)."""
    here = os.getcwd()
    if not any(entry in ("", here) or os.path.abspath(entry) == here for entry in sys.path):
        sys.path.insert(0, here)
        importlib.invalidate_caches()


def find_module(spec: str, *, field: str) -> str:
    """Check that the module of ``module:callable`` can be found, without importing it; return
    ``spec``.

    Raises:
        FieldError: on ``field``: bad form, or "cannot find module 'm' of 'm:f'; ...".
    """
    module, _ = split_spec(spec, field=field)
    working_directory_first()
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise _error(
            field,
            spec,
            f"cannot find module {module!r} of {spec!r}; check the name and that it is in "
            "this folder or on PYTHONPATH",
        )
    return spec


def import_callable(spec: str, *, field: str, expected: str = "a callable") -> Any:
    """Import ``module:callable`` and return the callable.

    Args:
        field: the field that holds ``spec``, named in every error.
        expected: what the callable should be, for the "not callable" message (e.g. "a
            per-example loss fn(y_true, y_pred)").

    Raises:
        FieldError: on ``field``: bad form, the module cannot be imported (its error's first
            line), the attribute is missing, or it is not callable.
    """
    module_name, attr = split_spec(spec, field=field)
    working_directory_first()
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any failure while importing user code is bad input
        reason = (str(exc).strip().splitlines() or [""])[0]
        raise _error(
            field,
            spec,
            f"cannot import module {module_name!r} ({type(exc).__name__}: {reason}); check the "
            "name and that it is in this folder or on PYTHONPATH",
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _error(
                field,
                spec,
                f"module {module_name!r} has no attribute {attr!r}; check the spelling after "
                "the ':'",
            ) from None
    if not callable(obj):
        raise _error(
            field,
            spec,
            f"{spec!r} is not callable (got {type(obj).__name__}); give {expected}",
        )
    return obj


def _error(field: str, spec: str, detail: str) -> FieldError:
    return FieldError(field, value=spec, detail=detail)
