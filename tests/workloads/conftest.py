"""Shared fixtures for the workload tests: a private cache dir, CSV files and a custom module."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``STUDY_CACHE_DIR`` at a fresh directory."""
    path = tmp_path / "cache"
    monkeypatch.setenv("STUDY_CACHE_DIR", str(path))
    return path


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write ``text`` (dedented) to ``tmp_path/name`` and return the path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return write


@pytest.fixture
def custom_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], str]]:
    """Write a uniquely named module on ``sys.path``; returns its name. Removed afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        name = f"custom_workload_{uuid.uuid4().hex[:12]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        return name

    yield write
    for name in [m for m in sys.modules if m.startswith("custom_workload_")]:
        del sys.modules[name]
