"""Importing Shallue et al.'s data release layout: reading, the ledger import, the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from study.analysis import steps_to_result
from study.cli import main as cli
from study.config.space import Stratum
from study.config.target import Target
from study.ext.batch_science.release import (
    LayoutError,
    read_measurements,
    sanitize_name,
    scan_release,
    workload_table,
)
from study.ledger import Ledger, list_studies, open_storage
from study.results import TrialState

TARGET = "val/classification_error<0.1"
NAN = math.nan

# (batch size) -> trials: (trial_id, status, how the metaparameters are stored, learning rate,
# curve of (step, val/classification_error)). Steps to result for TARGET, by hand:
#   b16: COMPLETE first < 0.1 at 800, INCOMPLETE at 1200, INFEASIBLE never  -> 800
#   b64: COMPLETE at 300, INCOMPLETE at 250 (INCOMPLETE trials count)       -> 250
#   b256: COMPLETE at 150, INCOMPLETE never, INFEASIBLE never               -> 150
MNIST = {
    16: [
        (1, "COMPLETE", "parameters", 0.01, [(0, 0.9), (200, 0.5), (400, 0.2), (800, 0.08), (1600, 0.05)]),
        (2, "INCOMPLETE", "top-level", 0.003, [(0, 0.9), (600, 0.3), (1200, 0.09)]),
        (3, "INFEASIBLE", "hparams", 3.0, [(0, 0.9), (100, NAN)]),
    ],
    64: [
        (1, "COMPLETE", "parameters", 0.03, [(0, 0.9), (100, 0.4), (200, 0.15), (300, 0.095), (400, 0.07)]),
        (2, "INCOMPLETE", "top-level", 0.05, [(0, 0.9), (250, 0.099)]),
        (3, "INFEASIBLE", "hparams", 5.0, [(0, 0.9), (50, 0.8), (100, NAN)]),
    ],
    256: [
        (1, "COMPLETE", "parameters", 0.1, [(0, 0.9), (50, 0.3), (100, 0.12), (150, 0.1 - 1e-9), (200, 0.05)]),
        (2, "INCOMPLETE", "top-level", 0.02, [(0, 0.9), (100, 0.5)]),
        (3, "INFEASIBLE", "hparams", 8.0, [(0, 0.9), (25, NAN)]),
    ],
}  # fmt: skip
MNIST_STEPS = {16: 800.0, 64: 250.0, 256: 150.0}
CIFAR = {32: [(0, "COMPLETE", "parameters", 0.1, [(0, 0.9), (100, 0.5)])]}


def write_trial(
    study_dir: Path,
    trial_id: int,
    status: str,
    style: str,
    lr: float,
    curve: list[tuple[int, float]],
) -> None:
    trial_dir = study_dir / str(trial_id)
    trial_dir.mkdir(parents=True)
    params = {"learning_rate": lr, "momentum": 0.9}
    metadata: dict[str, Any] = {"trial_id": trial_id, "status": status, "steps": curve[-1][0]}
    if style == "top-level":
        metadata.update(params)
    else:
        metadata[style] = params
    (trial_dir / "metadata.json").write_text(json.dumps(metadata))
    lines = ["step,train/cross_entropy_error,val/classification_error,val/cross_entropy_error"]
    for step, error in curve:
        text = "" if math.isnan(error) else repr(error)
        loss = "" if math.isnan(error) else repr(2 * error)
        lines.append(f"{step},{loss},{text},{loss}")
    (trial_dir / "measurements.csv").write_text("\n".join(lines) + "\n")


def write_workload(root: Path, dataset: str, model: str, optimizer: str, studies: dict) -> Path:
    workload = root / dataset / model / optimizer
    for batch, trials in studies.items():
        study_dir = workload / str(batch)
        study_dir.mkdir(parents=True)
        meta = {
            "batch_size": batch,
            "dataset": dataset,
            "model": model,
            "optimizer": optimizer,
            "train_steps": 2000,
            "parameter_configs": {"learning_rate": {"min_value": 1e-4, "max_value": 10.0}},
        }
        (study_dir / "study.json").write_text(json.dumps(meta))
        for trial in trials:
            write_trial(study_dir, *trial)
    return workload


@pytest.fixture
def release(tmp_path: Path) -> Path:
    """A release with two workloads: mnist/simple_cnn/nesterov_momentum and cifar_10/..."""
    root = tmp_path / "batch_science"
    write_workload(root, "mnist", "simple_cnn", "nesterov_momentum", MNIST)
    write_workload(root, "cifar_10", "resnet_8", "sgd", CIFAR)
    return root


@pytest.fixture
def mnist(release: Path) -> Path:
    return release / "mnist" / "simple_cnn" / "nesterov_momentum"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in tmp_path with no inherited stores; returns the journal path to pass as --storage."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    return tmp_path / "j.journal"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = cli(list(args))
    out, err = capsys.readouterr()
    return status, out, err


# ------------------------------------------------------------------------------ reading


def test_scan_release_finds_workloads_studies_and_trials(release: Path) -> None:
    workloads = {w.name: w for w in scan_release(release)}
    assert set(workloads) == {"mnist-simple_cnn-nesterov_momentum", "cifar_10-resnet_8-sgd"}
    mnist = workloads["mnist-simple_cnn-nesterov_momentum"]
    assert [s.batch_size for s in mnist.studies] == [16, 64, 256]
    assert mnist.trials_total == 9
    trials = {t.status: t for t in mnist.studies[0].trials}
    # "parameters" (the release), top-level numbers, and "hparams" all give the metaparameters;
    # trial_id, status and steps are not metaparameters.
    assert trials["COMPLETE"].params == {"learning_rate": 0.01, "momentum": 0.9}
    assert trials["INCOMPLETE"].params == {"learning_rate": 0.003, "momentum": 0.9}
    assert trials["INFEASIBLE"].params == {"learning_rate": 3.0, "momentum": 0.9}
    assert trials["INFEASIBLE"].state == "diverged"
    assert trials["INCOMPLETE"].state == "not_reached"


def test_a_workload_directory_is_read_directly(mnist: Path) -> None:
    (workload,) = scan_release(mnist)
    assert workload.name == "mnist-simple_cnn-nesterov_momentum"
    curve = read_measurements(workload.studies[0].trials[0])
    assert list(curve["step"]) == [0, 200, 400, 800, 1600]
    assert "val/classification_error" in curve.columns


def test_workload_table_gives_the_hand_computed_steps(mnist: Path) -> None:
    df = workload_table(scan_release(mnist)[0])
    steps = steps_to_result(df, Target.parse(TARGET)).set_index("batch_size")
    assert steps["steps_to_result"].to_dict() == MNIST_STEPS
    assert steps.loc[64, "best_learning_rate"] == pytest.approx(0.05)
    assert (df.loc[df["batch_size"] == 64, "examples"] % 64 == 0).all()


def test_sanitize_name() -> None:
    assert sanitize_name("imagenet/resnet 50") == "imagenet_resnet_50"
    assert sanitize_name("a-b.c_d") == "a-b.c_d"


# ------------------------------------------------------------------------------ importing


def test_import_then_ls_status_and_report(
    mnist: Path, env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "study", "import-batch-science", str(mnist), "--storage", str(env)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    name = "mnist-simple_cnn-nesterov_momentum"
    assert f"imported {name}:" in proc.stdout

    status, out, _ = run(capsys, "ls", "--storage", str(env))
    assert status == 0
    assert name in out and "imported" in out and "9/9" in out

    status, out, _ = run(capsys, "status", name, "--storage", str(env), "--json")
    assert status == 0
    summary = json.loads(out)
    assert summary["state"] == "imported"
    assert [s["stratum"] for s in summary["strata"]] == [
        "b16/default",
        "b64/default",
        "b256/default",
    ]
    assert all(s["statuses"] == {"not_reached": 2, "diverged": 1} for s in summary["strata"])

    out_dir = tmp_path / "rep"
    status, out, err = run(
        capsys,
        "report", name, "--target", TARGET, "--format", "json", "--storage", str(env),
        "--no-mlflow", "--out", str(out_dir),
    )  # fmt: skip
    assert status == 0, err
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.json"]
    report = json.loads((out_dir / "report.json").read_text())
    steps = {row["batch_size"]: row["steps_to_result"] for row in report["batch_sizes"]}
    assert steps == MNIST_STEPS
    # 9 trials are too few for the model of every trial: it says so in the answer's place; the
    # best trial of each batch size still reads as the cross-check.
    assert report["noise_scale"]["ok"] is False and report["answers"]["ok"] is False
    assert report["answers"]["reason"] == "too few trials reached the target (5)"
    assert report["cross_check"]["noise_scale"]["ok"] is True
    about = report["about"]
    assert (about["workload"], about["model"], about["optimizer"]) == (
        "mnist",
        "simple_cnn",
        "nesterov_momentum",
    )


def test_imported_trials_keep_their_curves_and_statuses(
    mnist: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "import-batch-science", str(mnist), "--storage", str(env))[0] == 0
    name = "mnist-simple_cnn-nesterov_momentum"
    ledger = Ledger.open(str(env), name)
    record = ledger.record()
    assert record is not None and record.imported and record.trials_total == 9
    assert (record.dataset, record.model, record.optimizer) == (
        "mnist",
        "simple_cnn",
        "nesterov_momentum",
    )
    assert record.source == str(mnist.resolve())
    stratum = Stratum(64, "default")
    assert stratum in ledger.strata()
    by_status = {t.extras["source_status"]: t for t in ledger.trials(stratum)}
    assert by_status["INFEASIBLE"].status is TrialState.DIVERGED
    complete = by_status["COMPLETE"]
    assert complete.status is TrialState.NOT_REACHED and complete.tuner == "batch_science"
    assert complete.params == {"learning_rate": 0.03, "momentum": 0.9}
    assert complete.result is not None
    measured = complete.result.curve[1]
    assert (measured.step, measured.examples) == (100, 6400)
    assert dict(measured.metrics) == {
        "train/cross_entropy_error": 0.8,
        "val/classification_error": 0.4,
        "val/cross_entropy_error": 0.8,
    }
    # Optuna sees the import as an ordinary study: diverged trials failed, the others complete
    seen = optuna.load_study(study_name=f"{name}/{stratum}", storage=ledger.storage).trials
    states = {t.number: t.state for t in seen}
    assert states[by_status["INFEASIBLE"].number] is optuna.trial.TrialState.FAIL
    assert states[complete.number] is optuna.trial.TrialState.COMPLETE


def test_a_parent_directory_imports_every_workload(
    release: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "import-batch-science", str(release), "--storage", str(env))
    assert status == 0
    assert "imported mnist-simple_cnn-nesterov_momentum:" in out
    assert "imported cifar_10-resnet_8-sgd:" in out
    assert list_studies(open_storage(str(env))) == [
        "cifar_10-resnet_8-sgd",
        "mnist-simple_cnn-nesterov_momentum",
    ]


def test_name_option_and_report_needs_a_target(
    mnist: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        run(capsys, "import-batch-science", str(mnist), "--name", "m1", "--storage", str(env))[0]
        == 0
    )
    status, _, err = run(capsys, "report", "m1", "--storage", str(env), "--no-mlflow")
    assert status == 2
    assert "--target" in err and "val/classification_error" in err
    assert len(err.strip().splitlines()) == 1


def test_reimport_is_refused_and_the_study_is_untouched(
    mnist: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "import-batch-science", str(mnist), "--storage", str(env))[0] == 0
    before = _trial_counts(env)
    status, _out, err = run(capsys, "import-batch-science", str(mnist), "--storage", str(env))
    assert status == 2
    assert "already exists" in err and len(err.strip().splitlines()) == 1
    assert _trial_counts(env) == before


def _trial_counts(journal: Path) -> dict[str, int]:
    storage = open_storage(str(journal))
    counts = {}
    for name in list_studies(storage):
        ledger = Ledger(storage, name)
        counts.update({f"{name}/{s}": len(ledger.trials(s)) for s in ledger.strata()})
    return counts


def test_name_with_several_workloads_is_refused(
    release: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(
        capsys, "import-batch-science", str(release), "--name", "x", "--storage", str(env)
    )
    assert status == 2 and "--name" in err and "2 workloads" in err


def _no_study_json(root: Path) -> Path:
    (root / "empty").mkdir()
    return root / "empty"


def _bad_study_json(root: Path) -> Path:
    (root / "mnist/simple_cnn/nesterov_momentum/64/study.json").write_text("{not json")
    return root


def _missing_key(root: Path) -> Path:
    path = root / "mnist/simple_cnn/nesterov_momentum/64/study.json"
    path.write_text(json.dumps({"batch_size": 64, "dataset": "mnist"}))
    return root


def _bad_metadata(root: Path) -> Path:
    (root / "mnist/simple_cnn/nesterov_momentum/16/2/metadata.json").write_text("[1, 2")
    return root


def _bad_status(root: Path) -> Path:
    path = root / "mnist/simple_cnn/nesterov_momentum/16/2/metadata.json"
    path.write_text(json.dumps({"trial_id": 2, "status": "DONE", "learning_rate": 0.1}))
    return root


def _no_step_column(root: Path) -> Path:
    path = root / "mnist/simple_cnn/nesterov_momentum/256/1/measurements.csv"
    path.write_text("global_step,val/classification_error\n0,0.9\n")
    return root


def _missing_metadata(root: Path) -> Path:
    (root / "mnist/simple_cnn/nesterov_momentum/16/9").mkdir()
    return root


@pytest.mark.parametrize(
    ("breaks", "expected"),
    [
        (lambda root: root / "nowhere", "no such directory"),
        (_no_study_json, "no study.json found"),
        (_bad_study_json, "64/study.json: not valid JSON"),
        (_missing_key, "64/study.json: missing key(s) model, optimizer"),
        (_bad_metadata, "16/2/metadata.json: not valid JSON"),
        (_bad_status, "16/2/metadata.json: status must be one of"),
        (_no_step_column, "256/1/measurements.csv: no 'step' column"),
        (_missing_metadata, "16/9/metadata.json: missing"),
    ],
    ids=[
        "missing-dir",
        "no-study-json",
        "bad-study-json",
        "missing-key",
        "bad-metadata",
        "bad-status",
        "no-step",
        "no-metadata",
    ],
)
def test_bad_layouts_exit_2_with_one_line(
    release: Path, env: Path, capsys: pytest.CaptureFixture[str], breaks, expected: str
) -> None:
    target = breaks(release)
    status, _out, err = run(capsys, "import-batch-science", str(target), "--storage", str(env))
    assert status == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1
    assert list_studies(open_storage(str(env))) == []


def test_a_failure_half_way_leaves_the_storage_as_it_was(
    mnist: Path, env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The header is fine (so the scan passes) but the body does not parse: the import fails
    # while writing the last batch size, and every study it created is deleted again.
    path = mnist / "256" / "2" / "measurements.csv"
    path.write_text("step,val/classification_error\n0,0.9\n1,2,3,4,5\n")
    with pytest.raises(LayoutError, match=r"256/2/measurements\.csv: not a readable CSV"):
        read_measurements(scan_release(mnist)[0].studies[-1].trials[1])
    status, _, err = run(capsys, "import-batch-science", str(mnist), "--storage", str(env))
    assert status == 2 and "not a readable CSV" in err
    assert open_storage(str(env)).get_all_studies() == []
