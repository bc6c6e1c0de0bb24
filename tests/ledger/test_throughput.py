"""The throughput probe's rows kept with a study (`Ledger.set_throughput` / `throughput`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from study.errors import UsageError
from study.ledger import Ledger, StudyRecord

ROW = {
    "batch_size": 128,
    "strategy": "mirrored:2",
    "replicas": 2,
    "seconds_per_step": 0.0021,
    "samples": [0.0020, 0.0021, 0.0025],
    "hardware": "2 x CPU",
}


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "s")
    ledger.create(StudyRecord("s", config_text="name: s\n", trials_total=4))
    return ledger


def test_rows_come_back_as_stored_from_a_fresh_ledger(ledger: Ledger, tmp_path: Path) -> None:
    assert ledger.throughput() == []

    ledger.set_throughput([ROW])

    again = Ledger.open(str(tmp_path / "j.journal"), "s", create=False)
    assert again.throughput() == [ROW]
    assert again.record().trials_total == 4  # the study's record is untouched


def test_numpy_numbers_become_plain_and_non_finite_become_none(ledger: Ledger) -> None:
    ledger.set_throughput(
        [{**ROW, "batch_size": np.int64(64), "seconds_per_step": np.float64(math.nan)}]
    )

    row = ledger.throughput()[0]
    assert row["batch_size"] == 64 and type(row["batch_size"]) is int
    assert row["seconds_per_step"] is None


def test_a_new_probe_replaces_the_stored_rows(ledger: Ledger) -> None:
    ledger.set_throughput([ROW, {**ROW, "batch_size": 256}])
    ledger.set_throughput([{**ROW, "seconds_per_step": 0.5}])

    assert [r["seconds_per_step"] for r in ledger.throughput()] == [0.5]


def test_an_unknown_study_is_a_usage_error(tmp_path: Path) -> None:
    ledger = Ledger.open(str(tmp_path / "j.journal"), "nobody")

    with pytest.raises(UsageError, match="no study named 'nobody'"):
        ledger.set_throughput([ROW])
    assert ledger.throughput() == []
