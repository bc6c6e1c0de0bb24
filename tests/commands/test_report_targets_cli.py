"""`study report --targets` and `--predict-target` on the tiny ledger (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.cli import main as cli
from study.commands.report import prediction_tags
from study.commands.target_flags import parse_levels, parse_predict
from study.config.target import Target
from study.errors import UsageError
from tests.fakes import TINY as NAME
from tests.fakes import write_tiny_ledger


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    path = tmp_path / "j.journal"
    write_tiny_ledger(path)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
def test_targets_and_a_prediction_reach_every_output(journal: Path, tmp_path: Path, capsys):
    out = tmp_path / "out"
    status, printed, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", out, "--format", "json",
        "--format", "md", "--no-mlflow", "--targets", "0.4,0.5,0.6", "--predict-target", "0.65",
    )  # fmt: skip
    assert status == 0, err
    assert "prediction for val_accuracy >= 0.65, extrapolated from 0.4-0.6" in printed
    data = json.loads((out / "report.json").read_text())
    assert [row["threshold"] for row in data["targets"]["levels"]] == [0.4, 0.5, 0.6]
    assert data["targets"]["prediction"]["ok"]
    assert "--targets 0.4,0.5,0.6 --predict-target 0.65" in data["command"]
    assert (out / "targets.png").exists()


@pytest.mark.slow
def test_a_prediction_past_the_laws_support_is_one_line_exit_2_nothing_written(
    journal: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "refused"
    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", out, "--no-mlflow",
        "--targets", "0.4,0.5,0.6", "--predict-target", "0.95",
    )  # fmt: skip
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--predict-target: no prediction for val_accuracy >= 0.95" in err
    assert "trusted up to 1" in err
    assert not out.exists()


def test_bad_levels_are_named_by_their_flag(journal: Path, capsys) -> None:
    status, _, err = run(capsys, "report", NAME, "--storage", journal, "--targets", "0.4,x")
    assert status == 2 and "--targets must be 'auto' or a comma-separated list" in err
    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--predict-target", "val_loss<=0.1"
    )
    assert status == 2 and "--predict-target must be a level of the report's target" in err


def test_the_flags_parse_levels_and_a_level_or_a_target() -> None:
    target = Target.parse("val_accuracy>=0.6")
    assert parse_levels(None) is None and parse_levels("AUTO") == "auto"
    assert parse_levels("0.5, 0.55,0.6") == [0.5, 0.55, 0.6]
    assert parse_predict("0.7", target) == 0.7
    assert parse_predict("val_accuracy>=0.75", target) == 0.75
    with pytest.raises(UsageError, match="finite"):
        parse_predict("inf", target)
    assert prediction_tags(None) == {}


@pytest.mark.slow
def test_the_prediction_and_what_it_assumed_tag_the_parent_run(
    journal: Path, tmp_path: Path, capsys
):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'track.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(NAME, artifact_location=(tmp_path / "a").as_uri())
    parent = client.create_run(experiment, tags={"study.role": "parent", "study.name": NAME})
    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", tmp_path / "out", "--format",
        "json", "--tracking-uri", uri, "--targets", "0.4,0.5,0.6", "--predict-target", "0.65",
    )  # fmt: skip
    assert status == 0, err
    tags = client.get_run(parent.info.run_id).data.tags
    assert tags["study.prediction_target"] == "val_accuracy>=0.65"
    assert tags["study.prediction"].startswith(
        "for val_accuracy >= 0.65, extrapolated from 0.4-0.6"
    )
    assert tags["study.answer"].startswith("B_noise")
