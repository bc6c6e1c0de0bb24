"""The workload resolver: a workload built from its name and options, its model, loss and target
checked, every problem a `FieldError` on the field the user set.

Both front ends call it: ``study train`` (`resolve_workload`, errors named by flag) and the
study-file loader (`check_study`, handed to `study.config.studyfile.load_study_file`, errors
named ``FILE: key``). The fields are the study file's keys: ``workload``, ``workload_options``
(an option the workload does not take), ``workload_options.<option>`` (a value its check
refuses, e.g. ``workload_options.path``), ``model``, ``loss`` and ``target``. Example::

    resolve_workload("csv", {"path": "x.csv", "label": "y"}, validate=True)
    # FieldError on workload_options.path: "workload_options.path: cannot read 'x.csv': ..."
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from study.errors import FieldError, UsageError
from study.importing import is_spec
from study.workloads import get_workload
from study.workloads.base import Workload
from study.workloads.task import Task

if TYPE_CHECKING:  # pragma: no cover
    from study.config.study import StudyConfig
    from study.config.target import Target

__all__ = ["OPTIONS", "Resolved", "check_study", "option_fields", "resolve_workload"]

#: The field that holds the workload's options (its study-file key).
OPTIONS = "workload_options"


@dataclass(frozen=True)
class Resolved:
    """A built workload, the model name to train and the task (with the loss, if replaced)."""

    workload: Workload
    model: str
    task: Task


def resolve_workload(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    model: str | None = None,
    loss: str | None = None,
    target: Target | None = None,
    validate: bool = False,
) -> Resolved:
    """Build the workload and check the model, loss and target (no TensorFlow is imported).

    Args:
        validate: also run the workload's cheap checks of its data (`Workload.validate`: a
            file exists, its columns are there).

    Raises:
        FieldError: on ``workload``, ``workload_options[.<option>]``, ``model``, ``loss`` or
            ``target`` (see the module docstring).
    """
    with option_fields():
        try:
            workload = get_workload(name, options)
        except UsageError:
            raise
        except Exception as exc:  # a custom workload's constructor failed
            raise FieldError(
                "workload",
                value=name,
                detail=f"building {name!r} failed ({type(exc).__name__}: {exc})",
            ) from None
        if validate:
            workload.validate()
    model_name = workload.check_model(model)
    task = workload.task if loss is None else workload.task.with_loss(loss)
    if target is not None:
        task.check_target(target, workload=workload.name, open_metrics=is_spec(model_name))
    return Resolved(workload, model_name, task)


def check_study(config: StudyConfig) -> None:
    """A study file's workload, options, model, loss and target, checked as `resolve_workload`
    checks them (no data is read); for `study.config.studyfile.load_study_file`."""
    resolve_workload(
        config.workload,
        config.workload_options,
        model=config.model,
        loss=config.settings.loss,
        target=config.target,
    )


@contextmanager
def option_fields() -> Iterator[None]:
    """Inside it, an error about one workload option is on field ``workload_options.<option>``
    (an error of an option check written without `FieldError` is on ``workload_options``)."""
    try:
        yield
    except FieldError as err:
        if err.field in ("workload", OPTIONS) or err.field.startswith(f"{OPTIONS}."):
            raise
        raise err.within(OPTIONS) from None
    except UsageError as exc:
        raise FieldError(OPTIONS, detail=str(exc)) from None
