"""`study run`, `study resume` and `study status` on bad input: exit status 2, one line on
stderr, no traceback, and a study already in the store left as it was. Re-running a finished
study is a no-op; a different study file under the same name is refused.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from study.ledger import Ledger, list_studies, open_storage

pytestmark = pytest.mark.slow

STUDY: dict[str, Any] = {
    "name": "recorded",
    "workload": "tabular",
    "workload_options": {"rows": 1500},
    "target": "val_accuracy>=0.85",
    "budget": {"max_steps": 400},
    "eval_every": 10,
    "trials_per_stratum": 2,
    "search_space": {
        "batch_size": [128],
        "learning_rate": {"low": 1.0e-2, "high": 0.3, "scale": "log"},
        "strategy": ["default"],
    },
}


def study(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``study ARGS`` in ``cwd``: its default store is ``cwd/mlruns``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return subprocess.run(
        [sys.executable, "-m", "study", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Recorded:
    """A directory whose store holds the finished study `STUDY` (file ``recorded.yaml``)."""

    cwd: Path
    file: Path

    def ledger(self) -> dict[str, Any]:
        """Every study in the Optuna storage, its attributes and its trials."""
        ledgers = [
            Ledger.open(str(self.cwd / "mlruns" / "optuna.journal"), name)
            for name in list_studies(open_storage(str(self.cwd / "mlruns" / "optuna.journal")))
        ]
        return {
            ledger.name: {
                "record": ledger.record(),
                "trials": {str(s): ledger.trials(s) for s in ledger.strata()},
            }
            for ledger in ledgers
        }

    def journal_bytes(self) -> bytes:
        """The ledger file as stored: a command that changes nothing leaves it byte for byte."""
        return (self.cwd / "mlruns" / "optuna.journal").read_bytes()

    def mlflow_digest(self) -> str:
        return hashlib.sha256((self.cwd / "mlruns" / "mlflow.db").read_bytes()).hexdigest()

    def child_runs(self) -> list[tuple[str, str]]:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{self.cwd / 'mlruns' / 'mlflow.db'}")
        experiment = client.get_experiment_by_name(STUDY["name"])
        runs = client.search_runs([experiment.experiment_id])
        return sorted(
            (r.info.run_id, r.info.status) for r in runs if r.data.tags.get("study.role") == "trial"
        )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    cwd = tmp_path_factory.mktemp("recorded")
    file = write(cwd / "recorded.yaml", STUDY)
    result = study("run", str(file), "--tuner", "optuna", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    done = Recorded(cwd, file)
    trials = done.ledger()["recorded"]["trials"]["b128/default"]
    assert [t.status.value in ("reached", "pruned", "not_reached") for t in trials] == [True] * 2
    return done


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit status 2 and exactly one line on stderr, naming ``fragments``; no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


MALFORMED = {**STUDY, "name": "malformed", "budgets": {"max_steps": 400}}
del MALFORMED["budget"]
# A user's compiled model reports val_top1, not val_top5: only the trainer worker can tell.
OWN_MODEL = {**STUDY, "name": "own", "model": "own_models:build", "target": "val_top5>=0.9"}
OWN_MODELS = """
import keras


def build(input_shape, outputs):
    model = keras.Sequential([keras.Input(input_shape), keras.layers.Dense(outputs)])
    model.compile(loss="sparse_categorical_crossentropy", metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=1, name="top1")])
    return model
"""

BAD_INPUT = {
    "missing file": (["run", "no-such-study.yaml"], ["no-such-study.yaml", "not found"]),
    "malformed file": (["run", "malformed.yaml"], ["malformed.yaml", "'budgets'", "'budget'"]),
    "own model without the target metric": (
        ["run", "own.yaml"],
        ["own.yaml: target: unknown metric 'val_top5'", "val_top1"],
    ),
    "unknown tuner": (["run", "recorded.yaml", "--tuner", "nope"], ["--tuner", "nope"]),
    "zero trials": (["run", "recorded.yaml", "--trials", "0"], ["--trials", ">= 1"]),
    "zero workers": (["run", "recorded.yaml", "--workers", "0"], ["--workers", ">= 1"]),
    "resume unknown": (["resume", "unknown-name"], ["'unknown-name'", "study ls"]),
    "status unknown": (["status", "unknown-name"], ["'unknown-name'", "study ls"]),
}


@pytest.mark.parametrize(("argv", "fragments"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_one_line_and_leaves_the_store_alone(
    recorded: Recorded, argv: list[str], fragments: list[str]
) -> None:
    write(recorded.cwd / "malformed.yaml", MALFORMED)
    write(recorded.cwd / "own.yaml", OWN_MODEL)
    (recorded.cwd / "own_models.py").write_text(OWN_MODELS, encoding="utf-8")
    journal, mlflow = recorded.journal_bytes(), recorded.mlflow_digest()

    result = study(*argv, cwd=recorded.cwd)

    line = assert_usage_error(result, *fragments)
    assert line.startswith(f"study {argv[0]}: error: ")
    assert recorded.journal_bytes() == journal
    assert recorded.mlflow_digest() == mlflow


def test_rerunning_a_finished_study_runs_nothing(recorded: Recorded) -> None:
    ledger, runs = recorded.ledger(), recorded.child_runs()

    result = study("run", str(recorded.file), cwd=recorded.cwd)

    assert result.returncode == 0, result.stderr[-3000:]
    assert "reached at step" not in result.stdout
    assert recorded.ledger() == ledger
    assert recorded.child_runs() == runs


@pytest.mark.parametrize(
    "change",
    [
        {"workload_options": {"rows": 2000}},
        {"search_space": {**STUDY["search_space"], "batch_size": [64, 128]}},
    ],
    ids=["workload", "space"],
)
def test_another_study_under_the_same_name_is_refused(
    recorded: Recorded, tmp_path: Path, change: dict[str, Any]
) -> None:
    other = write(tmp_path / "other.yaml", {**STUDY, **change})
    journal, mlflow = recorded.journal_bytes(), recorded.mlflow_digest()

    result = study("run", str(other), cwd=recorded.cwd)

    assert_usage_error(result, "'recorded'", "already exists")
    assert recorded.journal_bytes() == journal  # not even a create_study record is appended
    assert recorded.mlflow_digest() == mlflow


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["ls", "--json"],
        ["status", "recorded"],
        ["status", "recorded", "--json"],
        ["export", "recorded", "--out", "table.csv"],
        ["report", "recorded", "--format", "json", "--no-mlflow", "--bootstrap", "10"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_read_only_commands_leave_the_ledger_untouched(
    recorded: Recorded, tmp_path: Path, argv: list[str]
) -> None:
    journal = recorded.journal_bytes()
    if argv[0] == "report":
        argv = [*argv, "--out", str(tmp_path / "report")]
    result = study(*argv, cwd=recorded.cwd)
    assert result.returncode == 0, result.stderr[-2000:]
    assert recorded.journal_bytes() == journal


def test_read_only_commands_create_no_store(tmp_path: Path) -> None:
    for argv in (["ls"], ["status", "nothing"], ["export", "nothing", "--out", "t.csv"]):
        study(*argv, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []
