"""`import study` and the API's names are light: no TensorFlow, MLflow or Optuna until used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import study

HEAVY = ("tensorflow", "keras", "mlflow", "optuna")


def test_the_api_names_import_nothing_heavy() -> None:
    code = (
        "import sys, study\n"
        "study.load, study.run, study.train, study.Study, study.Fit, study.StudyNotFound\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stderr


def test_the_package_lists_its_api_and_refuses_other_names() -> None:
    assert {"run", "load", "train", "Study", "Fit", "StudyNotFound"} <= set(dir(study))
    assert set(study.__all__) <= set(dir(study))
    with pytest.raises(AttributeError, match="module 'study' has no attribute 'nope'"):
        study.nope  # noqa: B018
