"""Workload options: declared in ``option_specs``, checked by the base class, errors on the option."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from study.errors import FieldError
from study.workloads import get_workload
from study.workloads.base import Dataset, Workload
from study.workloads.options import (
    Option,
    bool_option,
    boolean,
    choice,
    integer,
    number,
    option_error,
    tasks,
    text,
)
from study.workloads.task import TaskKind


class Blobs(Workload):
    """A workload with declared options and one check across two of them."""

    name: ClassVar[str] = "blobs"
    option_specs: ClassVar[dict[str, Option]] = {
        "samples": Option(100, integer(minimum=10)),
        "val_fraction": Option(0.2, number(low=0.0, high=1.0)),
        "noisy": Option(False, boolean()),
        "split": Option(None, choice("hash", "stratified", optional=True)),
        "task": Option("multiclass", tasks(TaskKind.MULTICLASS, TaskKind.BINARY)),
        "path": Option(None, text("a file path")),
        "tag": Option("plain"),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if self.options["noisy"] and self.options["split"] == "stratified":
            raise option_error("split", "must be hash when noisy")

    def load(self) -> Dataset:  # pragma: no cover - never loaded here
        raise NotImplementedError

    def build_model(self, model: str, data: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


def test_defaults_and_given_values_are_checked_and_kept() -> None:
    blobs = Blobs(samples="200", noisy="yes", path=7)
    assert blobs.options == {
        "samples": 200,
        "val_fraction": 0.2,
        "noisy": True,
        "split": None,
        "task": "multiclass",
        "path": "7",
        "tag": "plain",
    }


def test_options_are_read_only() -> None:
    with pytest.raises(TypeError):
        Blobs().options["samples"] = 5  # type: ignore[index]


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"samples": 5}, "samples", "workload option 'samples' must be an integer >= 10 (got 5)"),
        ({"samples": True}, "samples", "workload option 'samples' must be an integer >= 10"),
        (
            {"val_fraction": 1},
            "val_fraction",
            "workload option 'val_fraction' must be a number in (0, 1) (got 1)",
        ),
        ({"noisy": "maybe"}, "noisy", "workload option 'noisy' must be true or false"),
        ({"split": "random"}, "split", "workload option 'split' must be one of hash, stratified"),
        (
            {"task": "regression"},
            "task",
            "workload option 'task' must be one of multiclass, binary",
        ),
        (
            {"path": ""},
            "path",
            "workload option 'path': expected a file path (got an empty string)",
        ),
        ({"path": ["a"]}, "path", "workload option 'path': expected a file path (got ['a'])"),
        ({"noisy": True, "split": "stratified"}, "split", "workload option 'split' must be hash"),
    ],
)
def test_each_bad_value_is_a_field_error_on_its_option(
    options: dict, field: str, message: str
) -> None:
    with pytest.raises(FieldError) as excinfo:
        Blobs(**options)
    assert excinfo.value.field == field
    assert str(excinfo.value).startswith(message)
    assert str(excinfo.value.named(f"--{field}")).startswith(f"--{field}")


def test_an_unknown_option_lists_the_declared_ones() -> None:
    with pytest.raises(FieldError) as excinfo:
        Blobs(colour="red")
    assert excinfo.value.field == "workload_options"
    assert str(excinfo.value) == (
        "workload 'blobs' takes no option 'colour'; its options are samples, val_fraction, "
        "noisy, split, task, path, tag"
    )


def test_a_workload_without_options_takes_none() -> None:
    class Bare(Workload):
        name: ClassVar[str] = "bare"
        load = Blobs.load
        build_model = Blobs.build_model

    assert Bare().options == {}
    with pytest.raises(
        FieldError, match=r"^workload 'bare' takes no option 'x'; its options are none"
    ):
        Bare(x=1)


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), ("false", False), (" Yes", True), (0, False)]
)
def test_bool_option(value: object, expected: bool) -> None:
    assert bool_option("streamed", value) is expected


def test_bool_option_refuses_other_values() -> None:
    with pytest.raises(FieldError, match=r"^workload option 'streamed' must be true or false"):
        bool_option("streamed", 2)


@pytest.mark.parametrize(
    "name", ["csv", "digits", "images", "mnist1d", "shapes", "tabular", "tfrecord"]
)
def test_every_builtin_workload_declares_its_options(name: str) -> None:
    from study.workloads import _BUILTIN

    module, _, attr = _BUILTIN[name].partition(":")
    cls = getattr(__import__(module, fromlist=[attr]), attr)
    assert cls.option_specs, name
    with pytest.raises(FieldError) as excinfo:
        get_workload(name, {"no_such_option": 1})
    assert excinfo.value.field == "workload_options"
    assert ", ".join(cls.option_specs) in str(excinfo.value)
