"""The registry: names, lazy imports, custom ``module:callable`` workloads and option errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from study.config.rules import FieldError
from study.errors import UsageError
from study.workloads import Workload, available, float_option, get_workload, int_option

HEAVY = ("tensorflow", "keras", "mnist1d", "sklearn")

CUSTOM_SOURCE = """
from study.workloads.base import Dataset, Workload
from study.workloads.options import Option, integer
import numpy as np

class Tiny(Workload):
    name = "tiny"
    models = ("linear",)
    option_specs = {"size": Option(4, integer(minimum=1))}

    def load(self) -> Dataset:
        x = np.zeros((self.options["size"], 2), np.float32)
        y = np.zeros(self.options["size"], np.int32)
        return Dataset(x, y, x, y, num_classes=2)

    def build_model(self, model, data):
        raise NotImplementedError

def make_tiny(size: int = 4) -> Tiny:
    return Tiny(size=size)

def not_a_workload() -> int:
    return 42

class Holder:
    factory = staticmethod(make_tiny)

CONSTANT = 3
"""


def _heavy_modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter and list the heavy packages it imported."""
    probe = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import sys
        print(",".join(m for m in {HEAVY!r} if m in sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    return [m for m in result.stdout.strip().split(",") if m]


def test_available_lists_builtins_sorted() -> None:
    assert available() == [
        "csv",
        "digits",
        "images",
        "mnist1d",
        "shapes",
        "tabular",
        "tfrecord",
    ]


@pytest.mark.parametrize("name", ["digits", "mnist1d", "tabular"])
def test_builtin_instances_carry_name_and_options(name: str) -> None:
    workload = get_workload(name)
    assert isinstance(workload, Workload)
    assert workload.name == name
    assert workload.options  # defaults are recorded for logging
    assert workload.check_model(None) == workload.models[0]


def test_csv_is_built_without_reading_the_file() -> None:
    workload = get_workload("csv", {"path": "nowhere.csv", "label": "y"})
    assert workload.options["path"] == "nowhere.csv"
    assert workload.options["label"] == "y"


def test_options_are_passed_and_recorded() -> None:
    workload = get_workload("mnist1d", {"samples": 500, "seed": 3})
    assert workload.options == {"samples": 500, "seed": 3}


def test_unknown_workload_names_the_choices() -> None:
    with pytest.raises(FieldError) as excinfo:
        get_workload("foo")
    message = (
        "unknown workload 'foo'; choose from csv, digits, images, mnist1d, shapes, tabular, "
        "tfrecord, or give module:callable"
    )
    assert (excinfo.value.field, excinfo.value.value) == ("workload", "foo")
    assert str(excinfo.value) == f"workload: {message}"
    assert str(excinfo.value.named("--workload")) == f"--workload: {message}"


def test_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(
        UsageError,
        match=r"workload 'tabular' takes no option 'bogus'; "
        r"its options are rows, features, seed, val_fraction",
    ):
        get_workload("tabular", {"bogus": 1})


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        (
            "mnist1d",
            {"samples": "abc"},
            "workload option 'samples' must be an integer >= 100 (got 'abc')",
        ),
        (
            "mnist1d",
            {"samples": 50},
            "workload option 'samples' must be an integer >= 100 (got 50)",
        ),
        ("mnist1d", {"seed": True}, "workload option 'seed' must be an integer >= 0 (got True)"),
        (
            "tabular",
            {"val_fraction": 1.5},
            "workload option 'val_fraction' must be a number in (0, 1) (got 1.5)",
        ),
        (
            "digits",
            {"val_fraction": "half"},
            "workload option 'val_fraction' must be a number in (0, 1) (got 'half')",
        ),
    ],
)
def test_bad_option_values_name_the_option(name: str, options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload(name, options)
    assert str(excinfo.value) == message


def test_option_helpers_accept_cli_strings() -> None:
    assert int_option("samples", "500", minimum=100) == 500
    assert int_option("samples", 1e3, minimum=100) == 1000
    assert float_option("val_fraction", "0.25", low=0, high=1) == 0.25
    assert get_workload("tabular", {"rows": "200"}).options["rows"] == 200


def test_importing_the_registry_is_light() -> None:
    assert _heavy_modules_after("import study.workloads") == []


def test_workload_modules_and_validate_avoid_tensorflow(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a,label\n1,x\n2,y\n3,x\n4,y\n5,x\n")
    heavy = _heavy_modules_after(
        f"""
        from study.workloads import available, get_workload
        for name in ("digits", "mnist1d", "tabular"):
            workload = get_workload(name)
            workload.validate()
            workload.check_model(None)
        get_workload("csv", {{"path": {str(data)!r}, "label": "label"}}).validate()
        """
    )
    assert heavy == []


def test_custom_workload_class(custom_module: Callable[[str], str]) -> None:
    module = custom_module(CUSTOM_SOURCE)
    workload = get_workload(f"{module}:Tiny", {"size": 6})
    assert workload.name == "tiny"
    assert workload.load().x_train.shape == (6, 2)


def test_custom_workload_factory(custom_module: Callable[[str], str]) -> None:
    module = custom_module(CUSTOM_SOURCE)
    assert get_workload(f"{module}:make_tiny", {"size": 5}).options == {"size": 5}
    assert get_workload(f"{module}:Holder.factory").options == {"size": 4}


@pytest.mark.parametrize(
    ("attr", "options", "message"),
    [
        ("missing", {}, r"^workload: module '{m}' has no attribute 'missing'"),
        ("CONSTANT", {}, r"^workload: '{m}:CONSTANT' is not callable \(got int\)"),
        ("not_a_workload", {}, r"^workload: '{m}:not_a_workload' returned int, not a"),
        (
            "Tiny",
            {"colour": "red"},
            r"workload '{m}:Tiny' takes no option 'colour'; its options are size",
        ),
        ("", {}, r"^workload: expected module:callable \(got '{m}:'\)"),
    ],
)
def test_custom_workload_errors(
    custom_module: Callable[[str], str], attr: str, options: dict, message: str
) -> None:
    module = custom_module(CUSTOM_SOURCE)
    with pytest.raises(UsageError, match=message.format(m=module)) as excinfo:
        get_workload(f"{module}:{attr}", options)
    if message.startswith("^workload:"):  # the name is wrong: the caller names the field
        assert isinstance(excinfo.value, FieldError) and excinfo.value.field == "workload"


def test_custom_module_that_cannot_be_imported(custom_module: Callable[[str], str]) -> None:
    with pytest.raises(
        FieldError, match=r"^workload: cannot import module 'no_such_module_xyz' \(ModuleNotFound"
    ):
        get_workload("no_such_module_xyz:Thing")
    broken = custom_module("def oops(:\n")
    with pytest.raises(UsageError, match=rf"cannot import module '{broken}' \(SyntaxError"):
        get_workload(f"{broken}:oops")
