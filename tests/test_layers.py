"""The import graph of `study/`: no circles between modules, none between rooms, short modules.

A *room* is a subpackage of `study` (``study.ledger``) or a top-level module (``study.paths``);
each extension is a room of its own (``study.ext.allocation``): it may import the core, never
another extension.
Every import counts: at the top of a module, inside a function, or under ``TYPE_CHECKING``
(a type-only import still says that one module needs to know the other). With no circle between
rooms, the rooms stack into floors and every arrow points down: nothing imports upward.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "study"
#: The longest module the house allows (lines, docstrings and comments included).
MAX_LINES = 450


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """The modules of `study` that ``name`` (at ``path``) imports, resolved to known modules."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("study"):
                yield target


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def room(name: str) -> str:
    """``study.ledger`` for ``study.ledger.store``; ``study.ext.NAME`` for an extension's module."""
    parts = name.split(".")
    return ".".join(parts[:3] if parts[1:2] == ["ext"] else parts[:2])


def between_extensions(edges: Mapping[str, set[str]]) -> list[str]:
    """``A -> B`` for each import of a module of one extension from another extension's."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in edges.items()
        for target in targets
        if _extension(name) and _extension(target) and room(name) != room(target)
    )


def _extension(name: str) -> str | None:
    """The extension whose room ``name`` is in, or None for the core (and ``study.ext``)."""
    parts = room(name).split(".")
    return parts[2] if len(parts) == 3 else None


def circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_imports_of_every_kind(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import study.paths\n"
        "if TYPE_CHECKING:\n"
        "    from study.report.build import ScalingReport\n"
        "def f():\n"
        "    from study.ledger import store\n"
        "    from .errors import UsageError\n"
    )
    known = modules()
    found = set(imported("study.mod", source, known))
    assert found == {"study.paths", "study.report.build", "study.ledger.store", "study.errors"}


def test_no_circles_between_modules() -> None:
    # A package's face (its __init__) re-exports its own modules: an arrow from a module to the
    # face of its own room is Python's mechanics (the face runs first), not a dependency.
    edges = {
        name: {t for t in targets if not (t == room(name) != name and _is_face(t))}
        for name, targets in graph().items()
    }
    assert circles(edges) == []


def test_no_circles_between_rooms_so_nothing_imports_upward() -> None:
    rooms: dict[str, set[str]] = {}
    for name, targets in graph().items():
        rooms.setdefault(room(name), set()).update(
            room(t) for t in targets if room(t) != room(name) and room(t) != "study"
        )
    assert circles(rooms) == []


def test_each_extension_is_a_room_that_imports_the_core_and_no_other_extension() -> None:
    assert room("study.ext.allocation.plan") == room("study.ext.allocation") != room("study.ext")
    assert room("study.ledger.store") == "study.ledger" and room("study.paths") == "study.paths"
    drawn = {
        "study.ext.a.command": {"study.ext.a", "study.ledger.store", "study.ext.b.server"},
        "study.ext.b": {"study.ext", "study.errors"},
    }
    assert between_extensions(drawn) == ["study.ext.a.command -> study.ext.b.server"]
    edges = graph()
    extensions = {_extension(name) for name in edges} - {None}
    assert {"allocation", "batch_science", "branch", "schedules", "storage_proxy"} <= extensions
    assert between_extensions(edges) == []


def test_no_module_is_longer_than_the_house_allows() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def _is_face(name: str) -> bool:
    return (PACKAGE.parent / Path(*name.split(".")) / "__init__.py").exists()
