"""Optional dependencies fail with the extra to install."""

from __future__ import annotations

import importlib.util

import pytest

from study.deps import require_tensorflow
from study.errors import UsageError


def test_missing_tensorflow_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
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
