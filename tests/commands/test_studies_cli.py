"""`study status`: where the trials' wall time went, per stratum and for the whole study, read
from a ledger written through the ledger API (no training, no TensorFlow)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from study.cli import main as cli
from study.config.space import Stratum
from study.config.target import Target
from study.ledger import Ledger, LedgerTrial, StudyRecord
from tests.fakes import finished_trial, rising_curve, write_ledger

NAME = "timed"
TARGET = Target.parse("val_accuracy>=0.6")


def trial(batch: int, number: int, **timings: float) -> LedgerTrial:
    t = finished_trial(Stratum(batch, "default"), number, 0.1, rising_curve(batch, 50), TARGET)
    assert t.result is not None
    return dataclasses.replace(t, result=dataclasses.replace(t.result, timings=timings))


def parts(build: float, train: float, wall: float) -> dict[str, float]:
    """Timings whose trace, evaluate and bookkeeping share what build and train leave."""
    rest = (wall - build - train) / 3
    return {
        "build": build,
        "trace": rest,
        "train": train,
        "evaluate": rest,
        "bookkeeping": rest,
        "wall": wall,
    }


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.journal"
    trials = [
        trial(32, 0, **parts(0.2, 0.4, 1.0)),
        trial(32, 1, **parts(0.4, 0.6, 2.0)),
        trial(128, 0, **parts(0.1, 0.1, 0.5)),
        trial(128, 1),  # written before timings existed: not timed
    ]
    record = StudyRecord(NAME, config_text=f"name: {NAME}", trials_total=4)
    write_ledger(Ledger.open(str(path), NAME), record, trials)
    return path


def status(journal: Path, *flags: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(["status", NAME, "--storage", str(journal), *flags]) == 0
    return out.getvalue()


def timing_rows(text: str) -> dict[str, str]:
    """The rows of the timing table by their first column (the rest joined by spaces)."""
    lines = text.split("\n\n", 1)[1].splitlines()
    assert lines[0].split()[:6] == ["time", "per", "trial", "(mean", "s)", "timed"]
    assert lines[0].split()[6:] == [
        "build",
        "trace",
        "train",
        "evaluate",
        "replay",
        "bookkeeping",
        "wall",
        "train",
        "share",
    ]
    return {line.split()[0]: " ".join(line.split()[1:]) for line in lines[1:]}


def test_status_shows_mean_seconds_per_part_and_the_training_share(journal: Path) -> None:
    rows = timing_rows(status(journal))

    # b32: walls 1.0 and 2.0 s, training 0.4 and 0.6 s, builds 0.2 and 0.4 s, the rest by thirds
    # (no replay: these trials predate exact steps to target)
    assert rows["b32/default"] == "2 0.300 0.233 0.500 0.233 - 0.233 1.500 33.3%"
    assert rows["b128/default"] == "1 0.100 0.100 0.100 0.100 - 0.100 0.500 20.0%"
    # 3 timed trials: 3.5 s of wall, 1.1 s of training
    assert rows["all"] == "3 0.233 0.189 0.367 0.189 - 0.189 1.167 31.4%"


def test_status_json_has_the_breakdown_per_stratum_and_in_total(journal: Path) -> None:
    summary: dict[str, Any] = json.loads(status(journal, "--json"))

    by_stratum = {s["stratum"]: s["timings"] for s in summary["strata"]}
    assert by_stratum["b32/default"]["trials"] == 2
    assert by_stratum["b32/default"]["mean_seconds"]["build"] == pytest.approx(0.3)
    assert by_stratum["b32/default"]["total_seconds"]["wall"] == pytest.approx(3.0)
    assert by_stratum["b128/default"]["trials"] == 1
    assert summary["timings"]["trials"] == 3
    assert summary["timings"]["mean_seconds"]["bookkeeping"] == pytest.approx(
        (0.4 + 1.0 + 0.3) / 3 / 3
    )
    assert summary["timings"]["train_share"] == pytest.approx(1.1 / 3.5)


def test_status_of_an_untimed_study_shows_no_timing_table(tmp_path: Path) -> None:
    path = tmp_path / "old.journal"
    record = StudyRecord(NAME, config_text=f"name: {NAME}", trials_total=1)
    write_ledger(Ledger.open(str(path), NAME), record, [trial(32, 0)])

    text = status(path)

    assert "time per trial" not in text
    assert json.loads(status(path, "--json"))["timings"]["trials"] == 0


def test_status_says_how_steps_to_target_were_read_and_counts_crossings_that_fell_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held.journal"
    hovered = trial(32, 0)
    assert hovered.result is not None
    hovered = dataclasses.replace(
        hovered, result=dataclasses.replace(hovered.result, fell_back=((12, 14),))
    )
    record = StudyRecord(NAME, config_text=f"name: {NAME}", trials_total=2, hold="5%,5")
    write_ledger(Ledger.open(str(path), NAME), record, [hovered, trial(128, 0)])
    text = status(path)
    assert (
        "steps to target: from the step the target held from, through the next 5% of steps, "
        "at least 5; 1 trial(s) crossed it and fell back before it held" in text
    )
    data = json.loads(status(path, "--json"))
    assert (data["target_hold"], data["fell_back"]) == ("5%,5", 1)
    assert [s["fell_back"] for s in data["strata"]] == [1, 0]


def test_status_of_a_study_from_before_the_rule_says_first_evaluation(journal: Path) -> None:
    assert "steps to target: the first evaluation that met the target" in status(journal)
    assert json.loads(status(journal, "--json"))["target_hold"] == "off"
