"""Tests of `study train` end to end: subprocesses of ``python -m study`` in ``tmp_path`` (the
bad-input cases share one, each command with its own directory, exit status and output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from study.cli import build_parser
from study.commands.flags import FLAGS
from study.commands.train import build_spec
from study.config.hold import DEFAULT_HOLD
from study.config.trial import OPTIMIZER_RULES, SCHEDULE_RULES, Budget
from study.errors import UsageError
from tests.cli import study
from tests.inprocess import study_each, study_here

HEAVY_MODULES = ("tensorflow", "keras", "mlflow", "optuna", "keras_tuner")


def write_files(directory: Path) -> None:
    """Small files for the bad-input cases."""
    (directory / "ok.csv").write_text("a,b,y\n1,2,0\n3,4,1\n5,6,0\n", encoding="utf-8")
    (directory / "garbage.csv").write_bytes(b"\x00\xff\xfe\x9c garbage \x81\x01\n\xc3\x28")
    (directory / "quote.csv").write_text('a,"b\n1,2\n3,4\n', encoding="utf-8")
    (directory / "folder.csv").mkdir()


BAD_INPUTS = [
    pytest.param(["--workload", "nope"], ["--workload", "'nope'"], id="unknown-workload"),
    pytest.param(
        ["--workload", "tabular", "--model", "cnn"], ["--model", "'cnn'"], id="unknown-model"
    ),
    pytest.param(
        ["--workload", "tabular", "--strategy", "warp:2"],
        ["--strategy", "'warp:2'"],
        id="unknown-strategy",
    ),
    pytest.param(
        ["--workload", "tabular", "--target", "accuracy=0.9"],
        ["--target", "'accuracy=0.9'"],
        id="malformed-target",
    ),
    pytest.param(["--workload", "tabular", "--lr", "0"], ["--lr", "0"], id="lr-zero"),
    pytest.param(["--workload", "tabular", "--lr", "-0.5"], ["--lr", "-0.5"], id="lr-negative"),
    pytest.param(
        ["--workload", "tabular", "--batch-size", "0"], ["--batch-size", "0"], id="batch-zero"
    ),
    pytest.param(
        ["--workload", "tabular", "--batch-size", "abc"],
        ["--batch-size", "'abc'"],
        id="batch-not-a-number",
    ),
    pytest.param(
        ["--workload", "tabular", "--batch-size", "63", "--strategy", "mirrored:2"],
        ["--batch-size 63", "mirrored:2", "2 replicas"],
        id="batch-not-divisible",
    ),
    pytest.param(
        ["--workload", "csv", "--csv", "missing.csv", "--label", "y"],
        ["--csv", "missing.csv"],
        id="csv-missing",
    ),
    pytest.param(
        ["--workload", "csv", "--csv", "garbage.csv", "--label", "y"],
        ["--csv", "garbage.csv"],
        id="csv-garbage",
    ),
    pytest.param(
        ["--workload", "csv", "--csv", "quote.csv", "--label", "y"],
        ["--csv", "quote.csv"],
        id="csv-malformed",
    ),
    pytest.param(
        ["--workload", "csv", "--csv", "folder.csv", "--label", "y"],
        ["--csv", "folder.csv"],
        id="csv-is-a-directory",
    ),
    pytest.param(
        ["--workload", "csv", "--csv", "ok.csv", "--label", "label"],
        ["--label", "'label'", "ok.csv"],
        id="csv-label-column-missing",
    ),
    pytest.param(["--workload", "csv", "--csv", "ok.csv"], ["--label"], id="csv-without-label"),
    pytest.param(
        ["--workload", "tabular", "--csv", "ok.csv"],
        ["--csv", "--workload csv"],
        id="csv-without-csv-workload",
    ),
    pytest.param(
        ["--workload", "tabular", "--momentum", "1.0"],
        ["--momentum must be in [0, 1) (got 1.0)"],
        id="momentum-out-of-range",
    ),
    pytest.param(
        ["--workload", "tabular", "--eval-every", "0"],
        ["--eval-every must be >= 1 step (got 0)"],
        id="eval-every-zero",
    ),
    pytest.param(
        ["--workload", "tabular", "--optimizer", "rmsprop"],
        ["--optimizer: unknown optimizer 'rmsprop'"],
        id="unknown-optimizer",
    ),
]

# The data model names fields; `study train` names its flags, word for word as it always has.
FLAG_MESSAGES = [
    (["--workload", "nope"], "--workload: unknown workload 'nope'; choose from csv, digits, "
     "images, mnist1d, shapes, tabular, tfrecord, or give module:callable"),
    (["--workload", "study.errors:"], "--workload: expected module:callable (got 'study.errors:')"),
    (["--workload", "study.errors:nothing"], "--workload: module 'study.errors' has no attribute "
     "'nothing'; check the spelling after the ':'"),
    (["--strategy", "warp:2"], "--strategy: unknown strategy 'warp:2'; choose from auto, default, "
     "one_device, mirrored, mirrored:N, multi_worker_mirrored, multi_worker_mirrored:W, tpu"),
    (["--strategy", "tpu:2"], "--strategy: only mirrored and multi_worker_mirrored take a count "
     "(got 'tpu:2')"),
    (["--strategy", "mirrored:0"], "--strategy: mirrored:N needs N >= 1 (got 'mirrored:0')"),
    (["--target", "accuracy=0.9"], "--target: cannot parse 'accuracy=0.9'; write METRIC OP NUMBER "
     "with OP one of <, <=, >, >= (e.g. 'val_accuracy>=0.9' or 'val_loss<=0.3')"),
    (["--target", "acc>=1.2.3"], "--target: threshold '1.2.3' in 'acc>=1.2.3' is not a number"),
    (["--lr", "-1"], "--lr must be > 0 (got -1.0)"),
    (["--lr", "inf"], "--lr must be > 0 (got inf)"),
    (["--momentum", "1.0"], "--momentum must be in [0, 1) (got 1.0)"),
    (["--beta1", "-0.1"], "--beta1 must be in [0, 1) (got -0.1)"),
    (["--beta2", "1.5"], "--beta2 must be in [0, 1) (got 1.5)"),
    (["--epsilon", "0"], "--epsilon must be > 0 (got 0.0)"),
    (["--weight-decay", "-1"], "--weight-decay must be >= 0 (got -1.0)"),
    (["--optimizer", "rmsprop"], "--optimizer: unknown optimizer 'rmsprop'; choose from sgd, "
     "momentum, nesterov, adam"),
    (["--schedule", "step"], "--schedule: unknown schedule 'step'; choose from constant, linear, "
     "cosine"),
    (["--warmup", "-1"], "--warmup must be >= 0 steps (got -1)"),
    (["--decay-steps", "0"], "--decay-steps must be >= 1 (got 0)"),
    (["--end-factor", "1.5"], "--end-factor must be in [0, 1] (got 1.5)"),
    (["--max-steps", "0"], "--max-steps must be >= 1 (got 0)"),
    (["--max-examples", "0"], "--max-examples must be >= 1 (got 0)"),
    (["--max-seconds", "0"], "--max-seconds must be > 0 (got 0.0)"),
    (["--eval-every", "0"], "--eval-every must be >= 1 step (got 0)"),
    (["--eval-every", "-5"], "--eval-every must be >= 1 step (got -5)"),
    (["--eval-every", "often"], "--eval-every: cannot parse 'often'; use a step count (e.g. 25) "
     "or geometric:RATIO (e.g. geometric:1.1)"),
    (["--eval-every", "geometric:1.0"], "--eval-every geometric ratio must be > 1 (got 1.0)"),
    (["--batch-size", "0"], "--batch-size must be >= 1 (got 0)"),
    (["--batch-size", "63", "--strategy", "mirrored:2"], "--batch-size 63 is not divisible by the "
     "2 replicas of strategy 'mirrored:2'; use a multiple of 2"),
    (["--workload-option", "rows=5"], "--workload-option rows must be an integer >= 100 (got 5)"),
    (["--workload-option", "bogus=1"], "workload 'tabular' takes no option 'bogus'; its options "
     "are rows, features, seed, val_fraction, task"),
    (["--target", "nosuchmetric>=0.5"], "--target: unknown metric 'nosuchmetric'; workload "
     "'tabular' reports val_loss, val_accuracy, val_error"),
    (["--target", "val_loss>=0.3"], "--target: 'val_loss>=0.3' waits for val_loss to rise, but "
     "lower val_loss is better; write val_loss<=0.3"),
    (["--loss", "mse"], "--loss: loss 'mse' does not suit a multiclass task; use "
     "sparse_categorical_crossentropy or module:callable"),
    (["--loss", "l2"], "--loss: unknown loss 'l2'; choose from sparse_categorical_crossentropy, "
     "binary_crossentropy, mse, mae, huber or give module:callable (a per-example loss "
     "fn(y_true, y_pred))"),
    (["--model", "no_such_module_xyz:build"], "--model: cannot find module 'no_such_module_xyz' "
     "of 'no_such_module_xyz:build'; check the name and that it is in this folder or on "
     "PYTHONPATH"),
    (["--model", "resnet"], "--model: unknown model 'resnet' for workload 'tabular'; choose from "
     "mlp, or give module:callable"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"), FLAG_MESSAGES, ids=[" ".join(a) for a, _ in FLAG_MESSAGES]
)
def test_errors_name_the_flag(args: list[str], message: str) -> None:
    parsed = build_parser().parse_args(["train", "--workload", "tabular", *args])
    with pytest.raises(UsageError) as info:
        build_spec(parsed)
    assert str(info.value) == message


def test_every_field_train_sets_has_a_flag() -> None:
    fields = {f"optimizer.{name}" for name in OPTIMIZER_RULES}
    fields |= {f"schedule.{name}" for name in SCHEDULE_RULES}
    fields |= {f"budget.{name}" for name in Budget.__dataclass_fields__}
    fields |= {"optimizer", "schedule", "workload", "batch_size", "strategy", "target", "cadence"}
    fields |= {"loss", "precision", "jit_compile"}
    assert fields <= set(FLAGS)


def test_precision_jit_and_loss_reach_the_spec() -> None:
    parsed = build_parser().parse_args(
        [
            *("train", "--workload", "tabular", "--precision", "mixed_bfloat16"),
            *("--jit-compile", "on", "--loss", "pkg.losses:focal"),
        ]
    )
    spec = build_spec(parsed)
    assert (spec.settings.precision, spec.settings.jit_compile, spec.settings.loss) == (
        "mixed_bfloat16",
        "on",
        "pkg.losses:focal",
    )
    params = spec.to_params()
    assert (params["precision"], params["jit_compile"], params["loss"]) == (
        "mixed_bfloat16",
        "on",
        "pkg.losses:focal",
    )


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, set[Path], Any]]:
    """Every `BAD_INPUTS` case as ``study train ARGS`` in a directory of its own, all in one
    Python process (`tests.inprocess.study_each`: each its own exit status, stdout and stderr,
    file descriptors included); by case id, the directory, what it held before, the result."""
    root = tmp_path_factory.mktemp("bad-input")
    dirs, before = {}, {}
    for case in BAD_INPUTS:
        dirs[case.id] = root / str(case.id)
        dirs[case.id].mkdir()
        write_files(dirs[case.id])
        before[case.id] = set(dirs[case.id].iterdir())
    runs = [(dirs[case.id], ["train", *case.values[0]]) for case in BAD_INPUTS]
    results = study_each(runs, logs=root / "logs")
    return {
        case.id: (dirs[case.id], before[case.id], result)
        for case, result in zip(BAD_INPUTS, results, strict=True)
    }


@pytest.mark.parametrize(("args", "needles"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_status_2(
    bad_runs: dict[str, tuple[Path, set[Path], Any]],
    request: pytest.FixtureRequest,
    args: list[str],
    needles: list[str],
) -> None:
    directory, before, proc = bad_runs[request.node.callspec.id]
    assert proc.args == ["study", "train", *args]

    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("study train: error: ")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]
    assert set(directory.iterdir()) == before  # no mlruns/, no mlflow.db, nothing
    assert not (directory / "mlruns").exists()


@pytest.mark.slow
def test_train_tabular_reaches_target_and_logs_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path}/m.db"
    proc = study_here(
        monkeypatch,
        capsys,
        "train",
        "--workload",
        "tabular",
        "--workload-option",
        "rows=2000",
        "--batch-size",
        "64",
        "--lr",
        "0.1",
        "--max-steps",
        "1500",
        "--tracking-uri",
        uri,
        "--json",
        cwd=tmp_path,
    )

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "reached"
    assert 0 < out["steps_to_target"] <= 1500
    assert out["examples_to_target"] == out["steps_to_target"] * 64
    assert out["final"]["val_accuracy"] >= 0.9
    assert out["environment"]["replicas"] == 1
    assert not (tmp_path / "mlruns").exists()  # everything went to the given store

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("study-train")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.run_id == out["mlflow_run_id"]
    assert run.info.status == "FINISHED"
    assert run.data.tags["status"] == "reached"
    params = run.data.params
    assert params["workload"] == "tabular"
    assert params["workload.rows"] == "2000"
    assert params["batch_size"] == "64"
    assert params["per_replica_batch"] == "64"
    assert params["replicas"] == "1"
    assert params["strategy"] == "auto"
    assert params["strategy_resolved"] == "default"
    assert params["optimizer"] == "nesterov"
    assert params["optimizer.learning_rate"] == "0.1"
    assert params["budget.max_steps"] == "1500"
    assert params["target"] == "val_accuracy>=0.9"
    metrics = run.data.metrics
    assert metrics["summary/steps_to_target"] == out["steps_to_target"]
    assert metrics["summary/examples_to_target"] == out["examples_to_target"]
    accuracy = client.get_metric_history(run.info.run_id, "curves/val_accuracy")
    reached = {m.step: m.value for m in accuracy if m.value >= 0.9}
    # the replayed, exact step is logged, and every step of its hold window met the target
    held = out["steps_to_target"]
    assert out["target_hold"] == "5%,5"
    assert set(range(held, held + DEFAULT_HOLD.window(held) + 1)) <= set(reached)
    assert all(start < held for start, _ in out["fell_back"])
    assert max(m.step for m in accuracy) >= out["steps_to_target"]
    assert min(m.step for m in accuracy) == 0


def numeric_csv(path: Path, rows: int = 600) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(rows, 3))
    labels = np.where(x[:, 0] > x[:, 1], "up", "down")
    lines = ["x1,x2,noise,label"]
    lines += [f"{a:.4f},{b:.4f},{c:.4f},{y}" for (a, b, c), y in zip(x, labels)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def text_csv(path: Path, rows: int = 400) -> None:
    rng = np.random.default_rng(1)
    positive = ["great", "lovely", "excellent", "superb", "fun", "wonderful"]
    negative = ["awful", "boring", "terrible", "dull", "bad", "tedious"]
    neutral = ["the", "film", "was", "plot", "actors", "really", "quite", "story"]
    lines = ["id,review,sentiment"]
    for i in range(rows):
        good = i % 2 == 0
        words = list(rng.choice(neutral, size=5)) + list(
            rng.choice(positive if good else negative, size=2)
        )
        rng.shuffle(words)
        lines.append(f"{i},{' '.join(words)},{'pos' if good else 'neg'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_train_csv_numeric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    numeric_csv(tmp_path / "points.csv")
    proc = study_here(
        monkeypatch,
        capsys,
        "train",
        "--workload",
        "csv",
        "--csv",
        "points.csv",
        "--label",
        "label",
        "--batch-size",
        "32",
        "--lr",
        "0.1",
        "--max-steps",
        "2000",
        "--target",
        "val_accuracy>=0.9",
        "--no-track",
        "--json",
        cwd=tmp_path,
    )

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "reached", out
    assert out["final"]["val_accuracy"] >= 0.9
    assert out["mlflow_run_id"] is None
    assert not (tmp_path / "mlruns").exists()


@pytest.mark.slow
def test_train_csv_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text_csv(tmp_path / "reviews.csv")
    proc = study_here(
        monkeypatch,
        capsys,
        "train",
        "--workload",
        "csv",
        "--csv",
        "reviews.csv",
        "--label",
        "sentiment",
        "--text-column",
        "review",
        "--batch-size",
        "32",
        "--lr",
        "0.1",
        "--max-steps",
        "2000",
        "--target",
        "val_accuracy>=0.85",
        "--no-track",
        "--json",
        cwd=tmp_path,
    )

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "reached", out
    assert out["final"]["val_accuracy"] >= 0.85


def test_help_imports_no_heavy_module(tmp_path: Path) -> None:
    code = f"""
import contextlib, io, json, sys
from study.cli import main
for argv in (["--help"], ["train", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
print(json.dumps(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules)))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert json.loads(proc.stdout) == []


def test_help_lists_train(tmp_path: Path) -> None:
    proc = study("--help", cwd=tmp_path)

    assert proc.returncode == 0, proc.stderr
    assert "train" in proc.stdout
    proc = study("train", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--batch-size" in proc.stdout
    assert "--strategy" in proc.stdout
