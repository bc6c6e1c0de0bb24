"""The `study` command line: a study name names folders (``reports/NAME``), so ``.`` and ``..``
are refused by every command that takes one, and in a study file: one line, exit 2, nothing
written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from study.cli import main as cli

COMMANDS = (
    ("report", "{name}"),
    ("report", "{name}", "--no-mlflow", "--format", "json"),
    ("status", "{name}"),
    ("resume", "{name}"),
    ("worker", "{name}"),
    ("export", "{name}", "--out", "x.csv"),
    ("probe", "{name}"),
    pytest.param(
        ("import-batch-science", "data", "--name", "{name}"),
        marks=pytest.mark.extension("batch_science"),
    ),
    ("init", "{name}"),
)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder inside an empty folder, the current directory."""
    folder = tmp_path / "inner" / "work"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    return folder


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*"))


@pytest.mark.parametrize("name", ["..", "."])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:1] + a[2:]))
def test_a_name_of_dots_alone_is_refused(
    work: Path, name: str, args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    before = files_under(work.parent.parent)
    assert cli([a.format(name=name) for a in args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"study {args[0]}: error: name must be letters, digits, '_', '.' or '-', not dots alone "
        f"(it names folders: reports/NAME) (got '{name}')\n"
    )
    assert files_under(work.parent.parent) == before  # nothing written, above or here


def test_a_study_file_named_dots_is_refused_at_load(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[1]
    data = yaml.safe_load((root / "search_spaces" / "quickstart.yaml").read_text())
    (work / "q.yaml").write_text(yaml.safe_dump({**data, "name": ".."}, sort_keys=False))
    assert cli(["run", "q.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("study run: error: q.yaml: name must be ") and "(got '..')" in err
    assert [p.name for p in files_under(work.parent.parent)] == ["inner", "work", "q.yaml"]


def test_the_command_exits_with_mains_status_and_freezes_the_heap_last(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import atexit
    import gc
    import sys

    from study import cli as module

    registered: list[object] = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(sys, "argv", ["study", "status", "."])

    with pytest.raises(SystemExit) as exited:
        module.entry()

    assert exited.value.code == 2  # `main`'s status for a study named "."
    assert "not dots alone" in capsys.readouterr().err
    assert registered == [gc.freeze]  # the first exit handler, so the last to run
