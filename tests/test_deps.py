"""Optional dependencies fail with the extra to install, in the words of this installation."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from study import deps
from study.deps import install_command, installed_from, require_tensorflow
from study.errors import UsageError


class _Distribution:
    def __init__(self, direct_url: dict | None) -> None:
        self.text = None if direct_url is None else json.dumps(direct_url)

    def read_text(self, name: str) -> str | None:
        return self.text if name == "direct_url.json" else None


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    """Pretend `study` was installed with this ``direct_url.json`` (None: from an index)."""

    def pretend(direct_url: dict | None) -> None:
        installed_from.cache_clear()
        monkeypatch.setattr(deps, "source_tree", lambda: None)  # as if in site-packages
        monkeypatch.setattr(metadata, "distribution", lambda name: _Distribution(direct_url))

    yield pretend
    installed_from.cache_clear()


def test_missing_tensorflow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorflow" else real(name, *a),
    )
    with pytest.raises(UsageError, match=r"TensorFlow is not installed: pip install .*\[cpu\]"):
        require_tensorflow()


def test_a_source_tree_reads_as_an_editable_checkout(tmp_path, monkeypatch) -> None:
    installed_from.cache_clear()
    root = Path(deps.__file__).resolve().parents[1]
    try:
        if (root / "pyproject.toml").is_file():  # the suite runs on a checkout
            assert installed_from() == ("editable", str(root))
            monkeypatch.chdir(root)
            assert install_command("cpu") == "pip install -e '.[cpu]'"
        else:  # the suite runs on an installed copy (site-packages)
            assert deps.source_tree() is None
            assert installed_from() is None or installed_from()[0] != "editable"
    finally:
        installed_from.cache_clear()


def test_an_editable_checkout_gets_pip_install_e(installed, tmp_path, monkeypatch) -> None:
    installed({"url": tmp_path.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.chdir(tmp_path)
    assert install_command("cpu") == "pip install -e '.[cpu]'"
    monkeypatch.chdir(tmp_path.parent)
    assert install_command("cpu") == f"pip install -e '{tmp_path.name}[cpu]'"


def test_a_directory_installed_as_is_is_named_by_its_path(installed, tmp_path, monkeypatch) -> None:
    source = tmp_path / "src dir" / "study"
    installed({"url": source.as_uri(), "dir_info": {}})
    monkeypatch.chdir(tmp_path / "..")
    assert install_command("postgres") == (
        f"pip install '{source.relative_to(tmp_path.parent)}[postgres]'"
    )


def test_an_index_install_gets_the_package_name(installed) -> None:
    installed(None)
    assert install_command("cpu") == "pip install 'scaling-study[cpu]'"
    assert (
        deps.tensorflow_install() == "pip install 'scaling-study[cpu]' (or '[gpu]' on a CUDA host)"
    )


def test_a_repository_install_gets_a_direct_reference(installed) -> None:
    installed(
        {
            "url": "https://example.org/team/study.git",
            "vcs_info": {"vcs": "git", "commit_id": "abc"},
        }
    )
    assert install_command("cpu") == (
        "pip install 'scaling-study[cpu] @ git+https://example.org/team/study.git'"
    )


def test_not_installed_at_all_reads_as_an_index_install(monkeypatch) -> None:
    def missing(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    installed_from.cache_clear()
    monkeypatch.setattr(deps, "source_tree", lambda: None)
    monkeypatch.setattr(metadata, "distribution", missing)
    try:
        assert install_command("cpu") == "pip install 'scaling-study[cpu]'"
    finally:
        installed_from.cache_clear()


_LEAN = """
import sys
from study.deps import KERAS_EXTRAS, without_keras_extras
with without_keras_extras():
    import tensorflow as tf
    import keras
print(sorted(n for n in KERAS_EXTRAS if n in sys.modules))
print(float(keras.layers.Dense(2)(tf.ones((1, 3))).numpy().sum() != 0))
import sklearn.base, matplotlib.pyplot
print("after", "sklearn" in sys.modules, "matplotlib" in sys.modules)
"""


@pytest.mark.slow
def test_a_worker_imports_tensorflow_without_keras_extras_which_import_later() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LEAN], capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["[]", "1.0", "after True True"]
