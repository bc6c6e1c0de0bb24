"""The house rules that keep the layers apart, checked on the source and on imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "study"


def sources(exclude: str | None = None) -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    return [f for f in files if exclude is None or exclude not in f.relative_to(PACKAGE).parts]


def matching_lines(files: list[Path], pattern: re.Pattern[str]) -> list[str]:
    """``file:line: text`` of every line of ``files`` that ``pattern`` finds."""
    return [
        f"{f.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for f in files
        for number, line in enumerate(f.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


#: Optuna's private names the ledger uses, behind one door (`tests/test_private_names.py`).
OPTUNA_DOOR = PACKAGE / "adapters" / "optuna_internals.py"


#: Extensions' modules that are ledger code of their own (the storage proxy's client, server and
#: access: a storage in front of the ledger's database), held to the ledger's rules.
EXTENSION_LEDGERS = tuple(
    PACKAGE / "ext" / "storage_proxy" / f"{name}.py" for name in ("access", "client", "server")
)


def outside_the_ledger() -> list[Path]:
    """The modules outside study/ledger, its Optuna adapter and an extension's own ledger
    (``study/ext/NAME/ledger.py``: the records of its trials, e.g. branch trials; the storage
    proxy's modules)."""
    own = set((PACKAGE / "ext").glob("*/ledger.py"))
    return [
        f
        for f in sources(exclude="ledger")
        if f != OPTUNA_DOOR and f not in own | set(EXTENSION_LEDGERS)
    ]


def test_only_the_ledger_touches_stored_attributes_and_optuna_internals() -> None:
    # Built from pieces, so that grepping the repository for them finds only real uses.
    names = (
        "user_attrs" + r"\[",
        r"\._" + "trial_id",
        r"\._" + "study_id",
        "user_attrs" + r"\.get\(",
    )
    pattern = re.compile("|".join(names))
    assert matching_lines(outside_the_ledger(), pattern) == []


def test_only_the_ledger_touches_its_optuna_storage() -> None:
    """Outside study/ledger the storage is an opaque handle (`open_storage` to `Ledger`): no
    attribute of the ledger's storage (nor its `StorageAccess`, ``ledger.access``) is read and
    no storage method is called (a round of an adaptive allocation is claimed through
    ``ledger.notes.claim_round``)."""
    names = (
        r"\bledger\.storage\b",
        r"\bledger\.access\b",
        r"\.storage\.",
        r"optuna\.storages",
        "get_all_" + "studies",
        "get_all_" + "trials",
        "create_new_" + "study",
        "get_study_id_" + "from_name",
        r"set_(study|trial)_\w*_?" + "attr",
    )
    pattern = re.compile("|".join(names))
    assert matching_lines(outside_the_ledger(), pattern) == []


def test_nothing_imports_the_cli() -> None:
    offenders = [
        str(f.relative_to(PACKAGE))
        for f in sources()
        if f.name not in ("cli.py", "__main__.py")
        and re.search(
            r"^\s*(from study\.cli|from study import cli|import study\.cli)", f.read_text(), re.M
        )
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "module",
    ["study.analysis", "study.report", "study.ledger.records", "study.commands.studies"],
)
def test_light_layers_import_no_heavy_framework(module: str) -> None:
    heavy = ["tensorflow", "keras", "mlflow"] + (
        ["optuna"] if module != "study.commands.studies" else []
    )
    code = (
        f"import importlib, json, sys; importlib.import_module({module!r}); "
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


#: Layers below the CLI: their errors name a field (``path``, ``model``), never a flag.
FIELD_LAYERS = ("workloads", "trainer", "ledger", "analysis", "tuners")


def test_lower_layers_word_no_command_line_flag() -> None:
    files = [f for layer in FIELD_LAYERS for f in sorted((PACKAGE / layer).rglob("*.py"))]
    files += [f for f in EXTENSION_LEDGERS if f.exists()]
    assert matching_lines(files, re.compile(r"""['"`]--[a-z]""")) == []


def test_config_does_not_import_the_workloads() -> None:
    offenders = [
        str(f.relative_to(PACKAGE))
        for f in sorted((PACKAGE / "config").rglob("*.py"))
        if re.search(r"^\s*(from study\.workloads|import study\.workloads)", f.read_text(), re.M)
    ]
    assert offenders == []
