"""A noise-scale pilot stored with its study: written and read back, replaced, refused for a
study that is not stored or for values JSON cannot hold, and invisible to the study record."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from study.errors import UsageError
from study.ledger import Ledger, StudyRecord

PILOT = {
    "batch_size": 32,
    "strategy": "default",
    "learning_rate": 0.1,
    "seed": 0,
    "steps_run": 480,
    "target": "val_accuracy>=0.9",
    "at_step": 480,
    "b_simple": 25.0,
    "b_simple_low": 18.0,
    "b_simple_high": None,
    "curve": [[400, 24.0, None, None], [480, 25.0, 18.0, None]],
}


def ledger(tmp_path: Path, name: str = "s") -> Ledger:
    return Ledger.open(str(tmp_path / "optuna.journal"), name)


def test_pilot_is_stored_and_read_back(tmp_path: Path) -> None:
    store = ledger(tmp_path)
    record = store.create(StudyRecord("s", config_text="name: s", fingerprint="abc"))
    assert store.pilot() is None
    store.set_pilot(PILOT)
    assert ledger(tmp_path).pilot() == PILOT  # another process reads it
    store.set_pilot({**PILOT, "b_simple": 30.0})
    assert ledger(tmp_path).pilot()["b_simple"] == 30.0
    assert ledger(tmp_path).record() == record  # the record does not see it


def test_a_study_not_stored_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no study named 'other'"):
        ledger(tmp_path, "other").set_pilot(PILOT)


def test_nan_is_refused_not_stored(tmp_path: Path) -> None:
    store = ledger(tmp_path)
    store.create(StudyRecord("s", config_text="name: s", fingerprint="abc"))
    with pytest.raises(ValueError):
        store.set_pilot({**PILOT, "b_simple": math.nan})
    assert store.pilot() is None
