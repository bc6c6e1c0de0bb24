"""`study run`, `study resume` and `study status` on bad input: exit status 2, one line on
stderr, no traceback, and a study already in the store left as it was. Re-running a finished
study is a no-op; a different study file under the same name is refused. The commands on the
recorded study share one Python process, each with its own exit status and output.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from study.ledger import Ledger, list_studies, open_storage
from tests.cli import study
from tests.inprocess import sha256, study_each, study_here, study_in

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
    result = study_in("run", str(file), "--tuner", "optuna", cwd=cwd)
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
# A layer whose output has no known shape: Keras fails while building the model, in a report
# whose first line only names the layer ("Exception encountered when calling Shapeless.call().");
# the one line gives the reason after it.
TRACED_MODEL = {**STUDY, "name": "traced", "model": "own_models:shapeless"}
OWN_MODELS = """
import keras
import tensorflow as tf


class Shapeless(keras.layers.Layer):
    def call(self, x):
        return tf.numpy_function(lambda a: a, [x], tf.float32)


def shapeless(input_shape, outputs):
    return keras.Sequential(
        [keras.Input(input_shape), Shapeless(), keras.layers.Dense(4), keras.layers.Dense(outputs)]
    )


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
    "own model failing when traced": (
        ["run", "traced.yaml"],
        ["traced.yaml", "ValueError", "Could not automatically infer the output shape"],
    ),
    "unknown tuner": (["run", "recorded.yaml", "--tuner", "nope"], ["--tuner", "nope"]),
    "zero trials": (["run", "recorded.yaml", "--trials", "0"], ["--trials", ">= 1"]),
    "zero workers": (["run", "recorded.yaml", "--workers", "0"], ["--workers", ">= 1"]),
    "resume unknown": (["resume", "unknown-name"], ["'unknown-name'", "study ls"]),
    "status unknown": (["status", "unknown-name"], ["'unknown-name'", "study ls"]),
}


OTHER_STUDIES = {
    "workload": {"workload_options": {"rows": 2000}},
    "space": {"search_space": {**STUDY["search_space"], "batch_size": [64, 128]}},
}
READ_ONLY = [
    ["ls"],
    ["ls", "--json"],
    ["status", "recorded"],
    ["status", "recorded", "--json"],
    ["export", "recorded", "--out", "table.csv"],
    ["report", "recorded", "--format", "json", "--no-mlflow"],
]


@dataclass
class Commands:
    """The commands of the tests below on `recorded`, run in one Python process
    (`tests.inprocess.study_each`: each command its own exit status, stdout and stderr, file
    descriptors included, and the store's digests right after it); what the store held before."""

    journal: str | None
    mlflow: str | None
    results: dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def commands(recorded: Recorded, tmp_path_factory: pytest.TempPathFactory) -> Commands:
    write(recorded.cwd / "malformed.yaml", MALFORMED)
    write(recorded.cwd / "own.yaml", OWN_MODEL)
    write(recorded.cwd / "traced.yaml", TRACED_MODEL)
    (recorded.cwd / "own_models.py").write_text(OWN_MODELS, encoding="utf-8")
    elsewhere = tmp_path_factory.mktemp("commands")
    runs: dict[str, tuple[Path, list[str]]] = {}
    for case, (argv, _) in BAD_INPUT.items():
        runs[f"bad {case}"] = (recorded.cwd, argv)
    for case, change in OTHER_STUDIES.items():
        other = write(elsewhere / f"other-{case}.yaml", {**STUDY, **change})
        runs[f"other {case}"] = (recorded.cwd, ["run", str(other)])
    for index, argv in enumerate(READ_ONLY):
        if argv[0] == "report":
            argv = [*argv, "--out", str(elsewhere / f"report-{index}")]
        runs[f"read {index}"] = (recorded.cwd, argv)
    store = recorded.cwd / "mlruns"
    journal, mlflow = sha256(store / "optuna.journal"), sha256(store / "mlflow.db")
    done = study_each(
        list(runs.values()),
        logs=elsewhere / "logs",
        watch=(store / "optuna.journal", store / "mlflow.db"),
        env={"TF_CPP_MIN_LOG_LEVEL": "2"},
        timeout=600,
    )
    return Commands(journal, mlflow, dict(zip(runs, done, strict=True)))


@pytest.mark.parametrize(("argv", "fragments"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_is_one_line_and_leaves_the_store_alone(
    commands: Commands, request: pytest.FixtureRequest, argv: list[str], fragments: list[str]
) -> None:
    result = commands.results[f"bad {request.node.callspec.id}"]
    assert result.args == ["study", *argv]

    line = assert_usage_error(result, *fragments)
    assert line.startswith(f"study {argv[0]}: error: ")
    assert result.watched == [commands.journal, commands.mlflow]  # the store as it was


def test_rerunning_a_finished_study_runs_nothing(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, runs = recorded.ledger(), recorded.child_runs()

    with monkeypatch.context() as env:
        env.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
        result = study_here(monkeypatch, capsys, "run", str(recorded.file), cwd=recorded.cwd)

    assert result.returncode == 0, result.stderr[-3000:]
    assert "reached at step" not in result.stdout
    assert recorded.ledger() == ledger
    assert recorded.child_runs() == runs


@pytest.mark.parametrize("change", OTHER_STUDIES.values(), ids=OTHER_STUDIES.keys())
def test_another_study_under_the_same_name_is_refused(
    commands: Commands, request: pytest.FixtureRequest, change: dict[str, Any]
) -> None:
    result = commands.results[f"other {request.node.callspec.id}"]
    assert yaml.safe_load(Path(result.args[-1]).read_text(encoding="utf-8")) == {**STUDY, **change}

    assert_usage_error(result, "'recorded'", "already exists")
    # Not even a create_study record is appended.
    assert result.watched == [commands.journal, commands.mlflow]


@pytest.mark.parametrize(
    "index", range(len(READ_ONLY)), ids=[" ".join(argv[:2]) for argv in READ_ONLY]
)
def test_read_only_commands_leave_the_ledger_untouched(commands: Commands, index: int) -> None:
    result = commands.results[f"read {index}"]
    assert result.args[1 : 1 + len(READ_ONLY[index])] == READ_ONLY[index]
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.watched[0] == commands.journal


def test_read_only_commands_create_no_store(tmp_path: Path) -> None:
    for argv in (["ls"], ["status", "nothing"], ["export", "nothing", "--out", "t.csv"]):
        study(*argv, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []
