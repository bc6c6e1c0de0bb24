import importlib.util

import pytest

from study.errors import UsageError
from study.ledger import open_storage
from study.runner.pool import require_tensorflow


def test_missing_tensorflow_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorflow" else real(name, *a),
    )
    with pytest.raises(
        UsageError, match=r"TensorFlow is not installed: pip install -e '\.\[cpu\]'"
    ):
        require_tensorflow()


def test_present_tensorflow_passes():
    require_tensorflow()


def test_unusable_storage_url_is_bad_input():
    with pytest.raises(UsageError, match=r"--storage: cannot open 'nosuchdb://x/y'"):
        open_storage("nosuchdb://x/y")


def test_sqlite_storage_url_opens(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path}/o.db")
    assert storage.get_all_studies() == []
