"""Extensions register with the core; the core imports none of them and runs without them."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from study.cli import build_parser, main
from study.errors import FieldError
from study.extension import (
    _REGISTERED,
    BUILTIN,
    EXTENSIONS_ENV,
    Extension,
    loaded,
    register,
    storage_opener,
)
from study.ledger import open_storage

PACKAGE = Path(__file__).resolve().parents[1] / "study"


def commands(parser) -> set[str]:
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_every_builtin_extension_loads_and_adds_its_commands(monkeypatch) -> None:
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    names = {e.name for e in loaded()}
    assert set(BUILTIN) <= names
    assert "import-batch-science" in commands(build_parser())


def test_the_core_parses_and_runs_without_extensions(monkeypatch, capsys) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    assert loaded() == ()
    parser = build_parser()
    assert "import-batch-science" not in commands(parser)
    assert {"run", "report", "status", "train"} <= commands(parser)
    with pytest.raises(SystemExit) as stop:
        main(["import-batch-science", "x"])
    assert stop.value.code == 2
    assert "invalid choice: 'import-batch-science'" in capsys.readouterr().err


def test_an_unknown_extension_name_is_one_line_and_exit_2(monkeypatch, capsys) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "batch_science,nope")
    assert main(["ls"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "STUDY_EXTENSIONS: no extension named nope (known: " in err
    assert "batch_science" in err.partition("(known: ")[2]


def test_a_name_is_registered_once() -> None:
    class One(Extension):
        name = "test-one"
        summary = "a test"

    class Other(Extension):
        name = "test-one"
        summary = "another"

    register(One)
    register(One)  # importing the module again is no clash
    with pytest.raises(ValueError, match="two extensions are named 'test-one'"):
        register(Other)


def test_no_core_module_imports_an_extension() -> None:
    """Only study/ext imports study.ext (the core asks `study.extension.loaded`)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "ext" in path.relative_to(PACKAGE).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [
                f"{path.relative_to(PACKAGE)}: {n}"
                for n in names
                if n == "study.ext" or n.startswith("study.ext.")
            ]
    assert offenders == []


def test_the_core_alone_answers_a_command_in_a_fresh_process(tmp_path) -> None:
    env = {"STUDY_EXTENSIONS": "none", "STUDY_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "study", "ls"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "study.ext" not in done.stderr


# -- storages: URL schemes and the flags that go with --storage ----------------------------------
class ToyStorage(Extension):
    """Opens ``toy://`` storages (in memory), with a flag that reaches the opener as a variable."""

    name = "toy-storage"
    summary = "a test"
    storage_urls = "toy://NAME (a toy)"
    opened: ClassVar[list[tuple[str, float, str | None]]] = []

    def storage_schemes(self) -> dict[str, Any]:
        return {"toy": self.open}

    def open(self, url: str, window: float, now: Any) -> Any:
        import optuna

        self.opened.append((url, window, os.environ.get("TOY_LEVEL")))
        return optuna.storages.InMemoryStorage()

    def add_storage_flags(self, p: Any) -> None:
        p.add_argument("--toy-level", help="how toy")

    def storage_environment(self, args: Any) -> dict[str, str | None]:
        level = getattr(args, "toy_level", None)
        return {"TOY_LEVEL": level} if level else {}


@pytest.fixture
def toy(monkeypatch) -> ToyStorage:
    """The toy registered (all extensions loaded) for one test, and forgotten after it."""
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    monkeypatch.delenv("TOY_LEVEL", raising=False)
    extension = ToyStorage()
    extension.opened = []
    monkeypatch.setitem(_REGISTERED, extension.name, extension)
    return extension


def test_an_extension_opens_the_storage_urls_of_its_schemes(toy, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("STUDY_HOME", str(tmp_path))
    assert type(open_storage("TOY://one", retry=7)).__name__ == "InMemoryStorage"
    assert toy.opened == [("TOY://one", 7.0, None)]
    assert storage_opener("postgresql://db/x") is None and storage_opener("ledger.journal") is None
    assert main(["ls", "--storage", "toy://two", "--toy-level", "3"]) == 0
    assert toy.opened[-1] == ("toy://two", 300.0, "3")  # the flag reached the opener
    assert "TOY_LEVEL" not in os.environ  # as it was, after the command
    help_text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "--toy-level" in help_text and "toy://NAME (a toy)" in " ".join(help_text.split())


def test_a_scheme_of_an_extension_not_loaded_is_one_line_naming_it(toy, monkeypatch, capsys):
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    with pytest.raises(FieldError) as error:
        open_storage("toy://one")
    assert str(error.value) == (
        "storage: 'toy://one' needs the extension 'toy-storage' "
        "(unset STUDY_EXTENSIONS or add toy-storage to it)"
    )
    assert main(["ls", "--storage", "toy://one"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "study ls: error: --storage: 'toy://one' needs the extension 'toy-storage' "
        "(unset STUDY_EXTENSIONS or add toy-storage to it)\n"
    )
    assert toy.opened == []
    with pytest.raises(SystemExit):  # nor its flag
        main(["ls", "--toy-level", "3"])
