"""The one importer of module:callable specs: every way a spec is wrong names its field."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from study.errors import FieldError
from study.importing import find_module, import_callable, split_spec, working_directory_first


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"importing_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            NOT_CALLABLE = 3

            class Box:
                @staticmethod
                def make():
                    return 7
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_a_dotted_callable_is_imported(module: str) -> None:
    assert import_callable(f"{module}:Box.make", field="model")() == 7


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{m}", "model: expected module:callable (got '{m}')"),
        (":make", "model: expected module:callable (got ':make')"),
        ("{m}:", "model: expected module:callable (got '{m}:')"),
        (
            "no_such_module_q7:f",
            "model: cannot import module 'no_such_module_q7' "
            "(ModuleNotFoundError: No module named 'no_such_module_q7'); check the name and that "
            "it is in this folder or on PYTHONPATH",
        ),
        (
            "{m}:missing",
            "model: module '{m}' has no attribute 'missing'; check the spelling after the ':'",
        ),
        (
            "{m}:NOT_CALLABLE",
            "model: '{m}:NOT_CALLABLE' is not callable (got int); give a "
            "function returning a model",
        ),
    ],
)
def test_each_way_a_spec_is_wrong_names_the_field(module: str, spec: str, message: str) -> None:
    with pytest.raises(FieldError) as excinfo:
        import_callable(
            spec.format(m=module), field="model", expected="a function returning a model"
        )
    assert excinfo.value.field == "model"
    assert str(excinfo.value) == message.format(m=module)
    assert str(excinfo.value.named("--model")).startswith("--model: ")


def test_a_module_is_found_without_being_imported(module: str) -> None:
    assert find_module(f"{module}:anything", field="loss") == f"{module}:anything"
    assert module not in sys.modules
    with pytest.raises(FieldError, match=r"^loss: cannot find module 'no_such_module_q7'"):
        find_module("no_such_module_q7:f", field="loss")


def test_split_spec() -> None:
    assert split_spec("a.b:c.d", field="workload") == ("a.b", "c.d")
    with pytest.raises(FieldError, match=r"^workload: expected module:callable"):
        split_spec("a.b", field="workload")


def test_a_module_in_the_working_directory_imports_without_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the `study` script runs: its own folder first on the path, not the working directory.
    name = f"beside_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def build():\n    return 'built'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(Path.cwd()))])
    try:
        assert find_module(f"{name}:build", field="model") == f"{name}:build"
        assert sys.path[0] == str(tmp_path)  # first, as under `python -m`
        assert import_callable(f"{name}:build", field="model")() == "built"
        working_directory_first()
        assert sys.path.count(str(tmp_path)) == 1  # once
    finally:
        sys.modules.pop(name, None)
