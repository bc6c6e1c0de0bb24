"""Extensions register with the core; the core imports none of them and runs without them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from study.cli import build_parser, main
from study.extension import BUILTIN, EXTENSIONS_ENV, Extension, loaded, register

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
