"""The docs' reference pages follow the code: the generated pages are what `docs/generate.py`
makes from the parser and the schema now, every environment variable the package reads is
listed, every page is in the site's navigation, and every figure resolves."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from study.extension import BUILTIN

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.extension(*BUILTIN)  # the page documents every built-in extension's commands
def test_the_cli_reference_is_what_the_parser_generates() -> None:
    generate = generator()
    assert generate.CLI_PAGE.read_text(encoding="utf-8") == generate.cli_markdown(), (
        "docs/reference/cli.md differs from study.cli.build_parser(): run "
        "`python docs/generate.py` and commit the page"
    )


def test_the_study_file_reference_is_what_the_schema_generates() -> None:
    generate = generator()
    assert generate.SCHEMA_PAGE.read_text(encoding="utf-8") == generate.schema_markdown(), (
        "docs/reference/study-file.md differs from study/config/study.schema.json: run "
        "`python docs/generate.py` and commit the page"
    )


@pytest.mark.extension(*BUILTIN)
def test_the_cli_reference_has_every_command_and_flag() -> None:
    from study.cli import build_parser

    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    commands = [name for name, _, _ in generator()._subcommands(build_parser())]
    assert {"train", "run", "worker", "report", "serve-storage"} <= set(commands)
    assert not [name for name in commands if f"\n## study {name}\n" not in page]
    assert "`--storage-retry SECONDS`" in page and "`--overhead SHARE`" in page


def test_the_check_says_which_page_is_stale(tmp_path: Path, monkeypatch) -> None:
    generate = generator()
    stale = tmp_path / "cli.md"
    stale.write_text("# an old page\n")
    monkeypatch.setattr(generate, "PAGES", {stale: generate.cli_markdown})
    monkeypatch.setattr(generate, "ROOT", tmp_path)
    assert generate.stale() == [stale]
    assert generate.main(["--check"]) == 1
    assert generate.main([]) == 0 and generate.stale() == []


def test_every_environment_variable_the_package_reads_is_documented() -> None:
    read = set()
    for path in (ROOT / "study").rglob("*.py"):
        read |= set(re.findall(r"[\"'](STUDY_[A-Z_]+)[\"']", path.read_text(encoding="utf-8")))
    page = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    assert read, "no STUDY_* variable found: has the package moved?"
    assert not [name for name in sorted(read) if f"`{name}`" not in page]


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    return []


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


def test_every_figure_resolves() -> None:
    figures = list((DOCS / "img").iterdir())
    assert figures
    assert not [f.name for f in figures if not f.resolve().is_file()]
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).resolve().is_file(), f"{page.name}: {target}"
