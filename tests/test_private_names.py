"""No module of `study` outside `study.adapters` reaches a private name of a dependency.

A private name is an import path with a part that starts with ``_`` (or ``keras.src``,
``tensorflow.python``, ``keras_tuner.src``/``keras_tuner.engine``, whose public faces are
``keras``, ``tensorflow`` and ``keras_tuner``), a name starting with ``_`` imported from one of
these packages, or an attribute ``x._name`` that no module of `study` defines (its own
attributes, ``self._x`` and ``cls._x``, are not counted). Each private name used is reached
through one module of `study.adapters`, whose contract test says what it relies on.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "study"
THIRD = ("optuna", "keras", "tensorflow", "keras_tuner", "multiprocessing", "mlflow")
#: Private-looking names of the standard library that are its public API.
PUBLIC = {"_exit", "_asdict", "_replace", "_fields", "_make"}


def _private_path(module: str) -> bool:
    parts = module.split(".")
    if parts[0] not in THIRD:
        return False
    if any(p.startswith("_") for p in parts[1:]):
        return True
    inner = {"keras": ("src",), "tensorflow": ("python",), "keras_tuner": ("src", "engine")}
    return len(parts) > 1 and parts[1] in inner.get(parts[0], ())


def _own_names(files: list[Path]) -> set[str]:
    """Every name `study` defines: functions, classes, variables, arguments, self attributes."""
    own: set[str] = set()
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                own.add(node.attr)
    return own


def private_sites(path: Path, own: set[str]) -> list[tuple[str | None, str]]:
    """``(package or None, what)`` for each private name ``path`` reaches (None: an attribute,
    whose package the source does not say)."""
    sites: list[tuple[str | None, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            bad = [a.name for a in node.names if a.name.startswith("_")]
            if _private_path(node.module) or (top in THIRD and bad):
                sites.append((top, f"{node.lineno}: from {node.module} import {bad or '...'}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _private_path(alias.name):
                    sites.append((alias.name.split(".")[0], f"{node.lineno}: import {alias.name}"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            base = node.value
            if node.attr.startswith("__") or node.attr in own or node.attr in PUBLIC:
                continue
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
                continue
            sites.append((None, f"{node.lineno}: .{node.attr}"))
    return sites


def offenders() -> list[str]:
    files = sorted(PACKAGE.rglob("*.py"))
    own = _own_names(files)
    found = []
    for f in files:
        parts = f.relative_to(PACKAGE).parts
        if parts[0] == "adapters":
            continue
        for _, what in private_sites(f, own):
            found.append(f"study/{'/'.join(parts)}:{what}")
    return found


def test_only_the_adapters_reach_private_names_of_dependencies() -> None:
    assert offenders() == [], "reach them through a module of study/adapters/"


def test_the_check_finds_each_kind_of_private_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from keras.src.utils import rng_utils\n"
        "import tensorflow.python.eager.context\n"
        "from mlflow.store.db.utils import _initialize_tables\n"
        "from keras_tuner.engine.trial import TrialStatus\n"
        "def f(oracle):\n"
        "    self._mine = oracle._brackets\n"
        "    return self._mine, oracle._mine, super()._x, os._exit\n"
    )
    found = private_sites(module, _own_names([module]))
    assert [package for package, _ in found] == [
        "keras", "tensorflow", "mlflow", "keras_tuner", None,
    ]  # fmt: skip
    assert found[-1][1].endswith("._brackets")
