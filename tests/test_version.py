"""The code version a study records: the package version plus a hash of the sources; another
code version is refused with one line naming both."""

from __future__ import annotations

import re

import pytest

from study import __version__
from study.errors import UsageError
from study.version import PIN, code_version, installed_version, require_same_code, source_hash


def test_installed_version_is_the_package_version_and_a_source_hash() -> None:
    assert re.fullmatch(rf"{re.escape(__version__)}\+[0-9a-f]{{10}}", installed_version())


def test_the_pin_replaces_the_computed_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PIN, "1.2.3+pinned")
    assert code_version() == "1.2.3+pinned"
    monkeypatch.delenv(PIN)
    assert code_version() == installed_version()


def test_the_hash_follows_source_contents_not_caches(tmp_path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "schema.json").write_text("{}")
    first = source_hash(package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.py").write_text("cached")
    (package / "notes.txt").write_text("not code")
    assert source_hash(package) == first
    (package / "a.py").write_text("x = 2\n")
    assert source_hash(package) != first
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "schema.json").rename(package / "schema.json")
    assert source_hash(package) != first  # a moved file is other code


def test_same_or_unrecorded_code_passes_and_other_code_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(PIN, "0.2.0+bbbbbbbbbb")
    require_same_code("s", "0.2.0+bbbbbbbbbb")
    require_same_code("s", None)  # a study from before versions were recorded
    with pytest.raises(UsageError) as error:
        require_same_code("mnist", "0.1.0+aaaaaaaaaa")
    message = str(error.value)
    assert "\n" not in message
    assert "'mnist'" in message and "0.1.0+aaaaaaaaaa" in message and "0.2.0+bbbbbbbbbb" in message
    assert "install the same version" in message and "new study" in message
