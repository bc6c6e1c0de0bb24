"""`study report` and `study export` on a tiny ledger written directly (no training)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from study.cli import main as cli
from study.commands.report import _command, _context
from study.config.target import Target
from tests.fakes import TINY as NAME
from tests.fakes import TINY_BATCH_SIZES as BATCH_SIZES
from tests.fakes import write_tiny_ledger


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    path = tmp_path / "j.journal"
    write_tiny_ledger(path)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def report_json(capsys, journal: Path, out: Path, *args: str) -> dict:
    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", out, "--format", "json",
        "--no-mlflow", *args,
    )  # fmt: skip
    assert status == 0, err
    return json.loads((out / "report.json").read_text())


def test_report_writes_every_format(journal: Path, tmp_path: Path, capsys) -> None:
    status, out, err = run(capsys, "report", NAME, "--storage", journal)
    assert status == 0, err
    folder = tmp_path / "reports" / NAME  # the default --out
    names = {p.name for p in folder.iterdir()}
    assert {"report.html", "report.md", "report.json", "trials.csv", "measurements.csv"} <= names
    assert {"steps_to_result.png", "best_lr.png"} <= names
    assert f"reports/{NAME}/report.html" in out
    assert "answer: B_noise " in out and f"{NAME}: target val_accuracy>=0.6" in out
    # No MLflow store here: nothing attached, and none created.
    assert "attached" not in out and not (tmp_path / "mlruns").exists()
    data = json.loads((folder / "report.json").read_text())
    assert data["target"]["text"] == "val_accuracy>=0.6"  # the study file's target
    assert data["state"] == "complete"
    assert data["noise_scale"]["ok"] and data["recommendation"]["accelerators"] == 8


def written(out: Path) -> dict[str, str]:
    return {name: (out / name).read_text() for name in ("report.html", "report.md", "report.json")}


def test_the_report_says_what_the_study_is_about(journal: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", out, "--no-mlflow",
        "--format", "html", "--format", "md", "--format", "json",
    )  # fmt: skip
    assert status == 0, err
    files = written(out)

    page = files["report.html"]
    top = page[: page.index('<section id="summary">')]
    assert '<p class="lead">mnist1d · mlp · nesterov</p>' in top
    for fact in ("mlp (the workload&#39;s default)", "constant", "4000 steps", "18 of 18 planned"):
        assert fact in top
    assert "<dd>tiny.yaml</dd>" in top
    about = json.loads(files["report.json"])["about"]
    assert (about["workload"], about["model"], about["optimizer"]) == ("mnist1d", "mlp", "nesterov")
    assert about["study_file"] == "tiny.yaml" and about["trials_planned"] == 18
    assert {"scaling-study", "numpy", "pandas", "optuna", "python"} <= set(about["packages"])
    data = json.loads(files["report.json"])
    assert data["context"] == {"storage": "j.journal"}  # --storage was absolute, inside cwd
    assert "--storage j.journal" in data["command"]
    for text in files.values():
        assert str(tmp_path) not in text


@pytest.mark.parametrize(
    ("source", "shown"),
    [("{tmp}/specs/tiny.yaml", "specs/tiny.yaml"), ("/elsewhere/specs/tiny.yaml", "tiny.yaml")],
)
def test_the_study_file_is_shown_relative_or_bare(
    tmp_path: Path, monkeypatch, capsys, source: str, shown: str
) -> None:
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "j.journal"
    write_tiny_ledger(journal, config_source=source.format(tmp=tmp_path))

    data = report_json(capsys, journal, tmp_path / "out")

    assert data["about"]["study_file"] == shown
    assert ["study file", shown] in data["about"]["shown"]


def test_an_imported_study_names_its_dataset_model_and_optimizer(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "j.journal"
    write_tiny_ledger(
        journal, kind="imported", config_text=None, config_source=None,
        source=str(tmp_path.parent / "release" / "mnist_simple_cnn"),
        dataset="mnist", model="simple_cnn", optimizer="nesterov_momentum",
    )  # fmt: skip
    out = tmp_path / "out"

    data = report_json(capsys, journal, out, "--target", "val_accuracy>=0.6", "--format", "html")

    about = data["about"]
    assert (about["workload"], about["model"]) == ("mnist", "simple_cnn")
    assert about["optimizer"] == "nesterov_momentum"
    assert about["imported_from"] == "mnist_simple_cnn" and about["study_file"] is None
    page = (out / "report.html").read_text()
    assert '<p class="lead">mnist · simple_cnn · nesterov_momentum</p>' in page
    assert str(tmp_path.parent) not in page


def test_storage_passwords_never_reach_the_report() -> None:
    args = argparse.Namespace(
        name=NAME,
        accelerators=None,
        overhead=None,
        confidence=0.95,
        storage="postgresql://ana:s3cret@db/studies",
    )

    assert _context(args) == {"storage": "postgresql://ana:***@db/studies"}
    command = _command(args, Target.parse("val_accuracy>=0.6"))
    assert "s3cret" not in command and "postgresql://ana:***@db/studies" in command


def test_target_option_recomputes(journal: Path, tmp_path: Path, capsys) -> None:
    base = report_json(capsys, journal, tmp_path / "a")
    harder = report_json(capsys, journal, tmp_path / "b", "--target", "val_accuracy>=0.7")
    assert harder["target"]["text"] == "val_accuracy>=0.7"
    before = {r["batch_size"]: r["steps_to_result"] for r in base["batch_sizes"]}
    after = {r["batch_size"]: r["steps_to_result"] for r in harder["batch_sizes"]}
    assert set(before) == set(after) == set(BATCH_SIZES)
    assert all(after[b] > before[b] for b in BATCH_SIZES)
    assert "--target 'val_accuracy>=0.7'" in harder["command"]


def test_accelerators_option(journal: Path, tmp_path: Path, capsys) -> None:
    data = report_json(capsys, journal, tmp_path / "a", "--accelerators", "4")
    assert data["accelerators"] == 4 and data["recommendation"]["accelerators"] == 4
    status, _, err = run(capsys, "report", NAME, "--storage", journal, "--accelerators", "0")
    assert status == 2 and "--accelerators" in err


def test_unknown_study_exits_2(journal: Path, capsys) -> None:
    status, _out, err = run(capsys, "report", "nope", "--storage", journal, "--no-mlflow")
    assert status == 2
    assert err.strip() == (
        "study report: error: no study named 'nope' in this storage; `study ls` lists the studies"
    )


@pytest.mark.parametrize("target", ["val_accuracy=>0.6", "accuracy", "val_accuracy>=high"])
def test_bad_target_exits_2(journal: Path, capsys, target: str) -> None:
    status, _, err = run(capsys, "report", NAME, "--storage", journal, "--target", target)
    assert status == 2
    assert err.startswith("study report: error: --target") and len(err.strip().splitlines()) == 1


def test_report_is_attached_to_the_mlflow_parent_run(journal: Path, tmp_path: Path, capsys) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(NAME, artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(experiment, tags={"study.role": "parent", "study.name": NAME})
    client.create_run(experiment, tags={"study.role": "trial"})
    out = tmp_path / "out"
    status, stdout, err = run(
        capsys, "report", NAME, "--storage", journal, "--tracking-uri", uri, "--out", out,
        "--format", "json", "--format", "md",
    )  # fmt: skip
    assert status == 0, err
    run_id = parent.info.run_id
    assert f"attached to MLflow run {run_id}" in stdout
    attached = {Path(a.path).name for a in client.list_artifacts(run_id, "report")}
    assert attached == {p.name for p in out.iterdir()}
    assert {"report.json", "report.md", "steps_to_result.png"} <= attached
    data = client.get_run(run_id).data
    assert data.metrics["answer/b_noise_low"] <= data.metrics["answer/b_noise"]
    assert data.metrics["answer/b_noise"] <= data.metrics["answer/b_noise_high"]
    assert "answer/recommended_batch" in data.metrics
    assert (
        data.tags["study.answer"].startswith("B_noise ")
        and "95% intervals" in data.tags["study.answer"]
    )
    assert (
        json.loads((out / "report.json").read_text())["answers"]["line"]
        == data.tags["study.answer"]
    )


def test_status_gives_the_answers_with_their_intervals(journal: Path, capsys) -> None:
    status, stdout, err = run(capsys, "status", NAME, "--storage", journal)
    assert status == 0, err
    line = next(x for x in stdout.splitlines() if x.startswith("answer: "))
    assert (
        "B_noise " in line and "perfect scaling up to " in line and "accelerators: batch " in line
    )

    status, stdout, err = run(capsys, "status", NAME, "--storage", journal, "--json")
    answers = json.loads(stdout)["answers"]
    assert answers["ok"] and answers["b_noise"]["low"] <= answers["b_noise"]["estimate"]
    assert answers["b_noise"]["estimate"] <= answers["b_noise"]["high"]
    assert answers["model"]["trials"] == 18 and answers["line"] in line


def test_export_writes_csv_and_parquet(journal: Path, tmp_path: Path, capsys) -> None:
    for name in ("table.csv", "table.parquet"):
        path = tmp_path / "exports" / name
        status, out, err = run(capsys, "export", NAME, "--storage", journal, "--out", path)
        assert status == 0, err
        df = pd.read_csv(path) if name.endswith(".csv") else pd.read_parquet(path)
        assert set(df["batch_size"]) == set(BATCH_SIZES)
        assert df["trial"].nunique() == 3 * len(BATCH_SIZES)
        assert f"to {path}" in out
    status, _, err = run(capsys, "export", NAME, "--storage", journal, "--out", tmp_path / "t.xlsx")
    assert status == 2 and ".csv or .parquet" in err
    status, _, err = run(
        capsys, "export", "nope", "--storage", journal, "--out", tmp_path / "t.csv"
    )
    assert status == 2 and "no study named 'nope'" in err


@pytest.mark.parametrize("level", ["0", "1", "1.5", "-0.2"])
def test_confidence_outside_zero_one_is_bad_input(journal: Path, capsys, level: str) -> None:
    status, _, err = run(capsys, "report", NAME, "--storage", journal, "--confidence", level)
    assert status == 2 and "--confidence must be a level between 0 and 1" in err
    assert len(err.strip().splitlines()) == 1


def test_confidence_option_sets_every_interval(journal: Path, tmp_path: Path, capsys) -> None:
    wide = report_json(capsys, journal, tmp_path / "a")
    narrow = report_json(capsys, journal, tmp_path / "b", "--confidence", "0.8")
    assert narrow["intervals"] == {"method": "model of every trial", "confidence": 0.8}
    (low95, high95), (low80, high80) = (
        wide["noise_scale"]["b_noise_ci"],
        narrow["noise_scale"]["b_noise_ci"],
    )
    assert low95 < low80 <= narrow["noise_scale"]["b_noise"] <= high80 < high95


def test_the_overhead_option_moves_the_critical_batch_size(
    journal: Path, tmp_path: Path, capsys
) -> None:
    from study.analysis.answers import overhead_batch_size

    default = report_json(capsys, journal, tmp_path / "a")
    tighter = report_json(capsys, journal, tmp_path / "b", "--overhead", "0.1")

    knee = default["answers"]["model"]["parameters"]["log_knee"]
    b_noise = default["answers"]["b_noise"]["estimate"]
    for data, overhead in ((default, 0.2), (tighter, 0.1)):
        assert data["answers"]["overhead"] == overhead
        expected = float(overhead_batch_size(b_noise, math.exp(knee), overhead))
        assert data["answers"]["critical_batch"]["estimate"] == pytest.approx(expected)
        assert data["noise_scale"]["critical_batch"] == pytest.approx(expected)
    assert tighter["command"].endswith("--overhead 0.1") or "--overhead 0.1" in tighter["command"]
    assert "10% overhead" in tighter["summary"]


@pytest.mark.parametrize("value", ["0", "-0.2", "11"])
def test_an_overhead_outside_its_range_is_bad_input(journal: Path, capsys, value: str) -> None:
    status, _, err = run(capsys, "report", NAME, "--storage", journal, "--overhead", value)
    assert status == 2 and "--overhead must be a share above perfect scaling in (0, 10]" in err
    assert len(err.strip().splitlines()) == 1
