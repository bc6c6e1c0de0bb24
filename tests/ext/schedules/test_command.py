"""`study schedule NAME` (and `Study.schedule`) on a tiny finished ledger written directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import study
from study.cli import main as cli
from study.config.schedule import Stage, load_schedule
from tests.fakes import TINY as NAME
from tests.fakes import write_tiny_ledger


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    path = tmp_path / "j.journal"
    write_tiny_ledger(path)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_schedule_starts_at_b_star_and_is_written_as_a_snippet(
    journal: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "schedule.yaml"
    status, printed, err = run(capsys, "schedule", NAME, "--storage", journal, "--out", out)
    assert status == 0, err
    # S(B) = 100 (1 + 64 / B): batch 8 needs the fewest examples, and 16 needs 1.11x them
    assert "# B* = 8" in printed and "batch_schedule:" in printed
    schedule = load_schedule(out, learning_rate=1.0)  # the file brings its own rate
    stages = schedule.stages
    assert [s.batch_size for s in stages] == [8, 16]
    assert 3_000 < stages[1].from_examples < 4_000  # half of batch 8's ~7,200 examples
    assert schedule.alpha == 0.0
    assert schedule.learning_rate == pytest.approx(0.01)  # batch 8's best rate
    section = yaml.safe_load(out.read_text())["batch_schedule"]
    assert section["seeds"] == 3 and section["strategy"] == "default"


def test_json_and_rate_rules(journal: Path, capsys) -> None:
    status, printed, err = run(
        capsys, "schedule", NAME, "--storage", journal, "--rate", "local", "--json",
        "--stage-warmup", "5", "--seeds", "2",
    )  # fmt: skip
    assert status == 0, err
    data = json.loads(printed)
    assert data["best_batch"] == 8 and data["strategy"] == "default"
    section = data["batch_schedule"]
    assert section["lr_scaling"]["alpha"] == pytest.approx(0.5, abs=0.01)  # best ~ B^0.5
    assert section["stage_warmup_steps"] == 5


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--rule", "cbs"), "no CBS(t): run `study branch FILE`"),
        (("--seeds", "0"), "--seeds must be at least 1"),
        (("--stage-warmup", "-1"), "--stage-warmup must be 0 or more"),
        (("--strategy", "mirrored:4"), "no trials on strategy 'mirrored:4'"),
        (("--target", "val_accuracy>>2"), "--target"),
        (("--target", "val_accuracy>=2"), "no fixed batch size reached the target"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(journal: Path, capsys, args, says) -> None:
    before = journal.read_bytes()
    status, _, err = run(capsys, "schedule", NAME, "--storage", journal, *args)
    assert status == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert journal.read_bytes() == before  # nothing written to the ledger


def test_an_unknown_study_exits_2(journal: Path, capsys) -> None:
    status, _, err = run(capsys, "schedule", "nope", "--storage", journal)
    assert status == 2 and "nope" in err


def test_the_python_api_derives_the_same_schedule(journal: Path) -> None:
    derived = study.load(NAME, storage=journal).schedule(rate="keep")
    assert derived.best_batch == 8
    assert derived.schedule.stages[0] == Stage(0, 8)
    with pytest.raises(study.UsageError, match="rule"):
        study.load(NAME, storage=journal).schedule(rule="triple")
