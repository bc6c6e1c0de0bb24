"""Extensions register with the core; the core imports none of them and runs without them."""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

import study as api
from study.api.studies import Study
from study.cli import build_parser, main
from study.config.studyfile import parse_study, study_keys
from study.errors import FieldError, UsageError
from study.extension import (
    _REGISTERED,
    BUILTIN,
    EXTENSIONS_ENV,
    Block,
    Extension,
    ReportFigure,
    ReportSection,
    Section,
    TrialSource,
    loaded,
    register,
    report_sections,
    storage_opener,
    study_sections,
    trial_sources,
)
from study.ledger import Ledger, open_storage
from study.report.figures import caption, figure_names
from study.report.html import render_html
from study.report.json import report_dict
from study.report.markdown import render_markdown
from study.report.stored import stored_report
from study.report.tables import Table
from tests.config.test_studyfile import BASE
from tests.fakes import TINY, TINY_STUDY_YAML, write_tiny_ledger

PACKAGE = Path(__file__).resolve().parents[1] / "study"


def commands(parser) -> set[str]:
    sub = next(a for a in parser._actions if a.dest == "command")
    return set(sub.choices)


def test_every_builtin_extension_loads_and_adds_its_commands(monkeypatch) -> None:
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    names = {e.name for e in loaded()}
    assert set(BUILTIN) <= names
    # in BUILTIN's order (commands, keys, report sections), whatever imported them first
    assert [e.name for e in loaded() if e.name in BUILTIN] == list(BUILTIN)
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
def toy_storage(monkeypatch) -> ToyStorage:
    """The toy registered (all extensions loaded) for one test, and forgotten after it."""
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    monkeypatch.delenv("TOY_LEVEL", raising=False)
    extension = ToyStorage()
    extension.opened = []
    monkeypatch.setitem(_REGISTERED, extension.name, extension)
    return extension


def test_an_extension_opens_the_storage_urls_of_its_schemes(
    toy_storage, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("STUDY_HOME", str(tmp_path))
    assert type(open_storage("TOY://one", retry=7)).__name__ == "InMemoryStorage"
    assert toy_storage.opened == [("TOY://one", 7.0, None)]
    assert storage_opener("postgresql://db/x") is None and storage_opener("ledger.journal") is None
    assert main(["ls", "--storage", "toy://two", "--toy-level", "3"]) == 0
    assert toy_storage.opened[-1] == ("toy://two", 300.0, "3")  # the flag reached the opener
    assert "TOY_LEVEL" not in os.environ  # as it was, after the command
    help_text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert "--toy-level" in help_text and "toy://NAME (a toy)" in " ".join(help_text.split())


def test_a_scheme_of_an_extension_not_loaded_is_one_line_naming_it(
    toy_storage, monkeypatch, capsys
):
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
    assert toy_storage.opened == []
    with pytest.raises(SystemExit):  # nor its flag
        main(["ls", "--toy-level", "3"])


# --------------------------------------------------------------------------------------------
# The hooks: study-file sections, report sections, trial sources, Study methods (a toy)


@dataclasses.dataclass(frozen=True)
class ToySection:
    size: int


def _read_toy(reader: Any, value: Any, config: Any) -> ToySection:
    return ToySection(reader.integer(value, "toy", rule=">= 1"))


def _toy_report(ledger: Any, config: Any, report: Any) -> dict[str, Any] | None:
    section = config.section("toy") if config is not None else None
    if section is None:
        return None
    return {"size": section.size, "study": ledger.name, "trials": len(report.trials)}


def _draw_toy(ax: Any, value: dict[str, Any]) -> Any:
    ax.plot([0, 1], [0, value["size"]], label="toy")
    return ax


class Toy(Extension):
    name = "toy"
    summary = "a toy: a study-file key, a report section, a figure, trials and a method"

    def sections(self) -> tuple[Section, ...]:
        return (Section("toy", _read_toy, {"type": ["integer", "null"], "minimum": 1}),)

    def report_sections(self) -> tuple[ReportSection, ...]:
        table = Table("Toy table", "", ["a", "b"], [["1", "2"]], text_columns=())
        return (
            ReportSection(
                key="toy",
                title="Toy section",
                anchor="toy",
                build=_toy_report,
                to_json=lambda value: value,
                blocks=lambda value: [
                    Block(lines=(f"size {value['size']} of {value['study']}",), tables=(table,))
                ],
                figures=(ReportFigure("toy_figure", "A toy's caption.", _draw_toy, bool),),
            ),
        )

    def trial_sources(self, config: Any) -> tuple[TrialSource, ...]:
        toy = config.section("toy")
        return () if toy is None else (TrialSource("toy", None, lambda *a, **k: toy.size),)

    def study_methods(self) -> dict[str, Any]:
        return {"toy_name": lambda study, suffix="": study.name + suffix}


@pytest.fixture
def toy(monkeypatch) -> Toy:
    """The toy extension, registered for one test (and loaded: STUDY_EXTENSIONS unset)."""
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    extension = Toy()
    monkeypatch.setitem(_REGISTERED, Toy.name, extension)
    return extension


def _with_toy(value: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["toy"] = value
    return data


def test_an_extension_reads_its_own_study_file_key(toy, monkeypatch) -> None:
    config = parse_study(_with_toy(3), "x.yaml")
    assert config.section("toy") == ToySection(3)
    assert parse_study(copy.deepcopy(BASE), "x.yaml").section("toy") is None
    assert "toy" in study_keys()
    assert [s.key for s in study_sections()][-1] == "toy"
    with pytest.raises(UsageError, match=r"^x\.yaml: toy must be >= 1 \(got 0\)$"):
        parse_study(_with_toy(0), "x.yaml")
    assert trial_sources(config)[0].run() == 3 and trial_sources(parse_study(BASE, "y")) == ()
    monkeypatch.setenv(EXTENSIONS_ENV, "batch_science")  # installed, not loaded
    assert "toy" not in study_keys()
    with pytest.raises(UsageError) as refused:
        parse_study(_with_toy(3), "x.yaml")
    assert str(refused.value) == (
        "x.yaml: key 'toy' needs the extension 'toy' (unset STUDY_EXTENSIONS or add toy to it)"
    )
    with pytest.raises(UsageError, match="unknown key 'nope' at top level"):
        parse_study({**BASE, "nope": 1}, "x.yaml")  # a key no extension reads


def test_an_extension_adds_a_report_section_a_figure_and_a_method(toy, tmp_path) -> None:
    journal = tmp_path / "j.journal"
    write_tiny_ledger(journal, config_text=TINY_STUDY_YAML + "toy: 7\n")
    report = stored_report(Ledger.open(str(journal), TINY, create=False))
    assert report.section("toy") == {"size": 7, "study": TINY, "trials": len(report.trials)}
    data = report_dict(report)
    keys = list(data)
    assert data["toy"]["size"] == 7 and keys.index("notes") < keys.index("toy")
    html = render_html(report, pngs={})
    assert '<section id="toy"><h2>Toy section</h2>' in html and "size 7 of tiny" in html
    assert html.index('id="cross-check"') < html.index('id="toy"') < html.index('id="tables"')
    markdown = render_markdown(report)
    assert "## Toy section\n\n- size 7 of tiny\n" in markdown
    assert markdown.index("## Tables") < markdown.index("### Toy table")
    assert "toy_figure" in figure_names(report) and caption("toy_figure") == "A toy's caption."
    loaded_study = api.load(TINY, storage=journal)
    assert loaded_study.toy_name("!") == "tiny!"
    ax = loaded_study.fit().plot.toy_figure()
    assert [line.get_label() for line in ax.lines] == ["toy"]


def test_without_the_extension_its_sections_and_methods_are_absent(toy, monkeypatch) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    assert report_sections() == () and study_sections() == ()
    with pytest.raises(AttributeError, match=r"'Study' object has no attribute 'toy_name' "
                       r"\(Study.toy_name needs the extension 'toy'"):  # fmt: skip
        object.__new__(Study).toy_name  # noqa: B018 - the attribute is the test


@pytest.mark.parametrize(
    ("key", "value", "extension"),
    [
        ("branch", {"batch_size": 16}, "branch"),
        (
            "batch_schedule",
            {"learning_rate": 0.01, "stages": [{"from_examples": 0, "batch_size": 8}]},
            "schedules",
        ),
    ],
)
def test_a_section_of_an_extension_not_loaded_is_one_line_and_exit_2(
    monkeypatch, capsys, tmp_path, key: str, value: Any, extension: str
) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    monkeypatch.setenv("STUDY_HOME", str(tmp_path))
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({**BASE, key: value}, sort_keys=False))
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == (
        f"study run: error: {path}: key '{key}' needs the extension '{extension}' "
        f"(unset STUDY_EXTENSIONS or add {extension} to it)\n"
    )
    assert list(tmp_path.iterdir()) == [path]  # nothing recorded


@pytest.mark.parametrize(
    ("command", "extension"), [("branch", "branch"), ("schedule", "schedules")]
)
def test_a_command_is_absent_without_its_extension(
    monkeypatch, capsys, command: str, extension: str
) -> None:
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    assert command not in commands(build_parser())
    with pytest.raises(SystemExit) as stop:
        main([command, "x"])
    assert stop.value.code == 2
    assert f"invalid choice: '{command}'" in capsys.readouterr().err
    monkeypatch.setenv(EXTENSIONS_ENV, extension)
    assert command in commands(build_parser())


def test_without_extensions_the_report_has_none_of_their_keys(monkeypatch, tmp_path) -> None:
    journal = tmp_path / "j.journal"
    write_tiny_ledger(journal)
    monkeypatch.setenv(EXTENSIONS_ENV, "none")
    report = stored_report(Ledger.open(str(journal), TINY, create=False))
    data = report_dict(report)
    assert "cbs" not in data and "batch_schedules" not in data and report.sections == {}
    with pytest.raises(AttributeError, match=r"Study\.schedule needs the extension 'schedules'"):
        api.load(TINY, storage=journal).schedule()
    monkeypatch.delenv(EXTENSIONS_ENV)
    data = report_dict(stored_report(Ledger.open(str(journal), TINY, create=False)))
    assert data["cbs"] is None and data["batch_schedules"] == []  # as before the extensions


def test_no_extension_imports_another() -> None:
    """An extension imports the core and itself, never another extension."""
    offenders = []
    for path in sorted((PACKAGE / "ext").rglob("*.py")):
        parts = path.relative_to(PACKAGE / "ext").parts
        if len(parts) < 2:
            continue
        own = f"study.ext.{parts[0]}"
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [
                f"{path.relative_to(PACKAGE)}: {n}"
                for n in names
                if n.startswith("study.ext.") and n != own and not n.startswith(own + ".")
            ]
    assert offenders == []
