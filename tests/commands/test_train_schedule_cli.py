"""`study train --batch-schedule` and `study.train(batch_schedule=...)`: inline stages or a
file, the rate rule, one line naming the flag or argument for bad input, and a real trial whose
batch grows (logged to MLflow with the schedule as params)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import study as api
from study.cli import build_parser
from study.commands.train import build_spec
from study.config.schedule import BatchSchedule, Stage
from study.errors import FieldError, UsageError
from tests.inprocess import study_here


def spec_of(*argv: str):
    return build_spec(build_parser().parse_args(["train", *argv]))


def test_inline_stages_take_lr_and_alpha_and_override_the_batch_size() -> None:
    spec = spec_of("--batch-schedule", "32,128@4096", "--lr", "0.05", "--lr-alpha", "1")
    assert spec.batch_size == 32 and spec.learning_rate == 0.05
    assert spec.batch_schedule == BatchSchedule((Stage(0, 32), Stage(4096, 128)), 0.05, 1.0)
    assert spec.to_params()["batch_schedule"] == "32@0,128@4096"
    ramped = spec_of("--batch-schedule", "32,128@4096", "--stage-warmup", "30")
    assert ramped.batch_schedule is not None and ramped.batch_schedule.stage_warmup_steps == 30


def test_a_file_brings_its_own_rate(tmp_path: Path) -> None:
    plan = BatchSchedule((Stage(0, 16), Stage(512, 64)), 0.02, 0.5, warmup_steps=5)
    snippet = tmp_path / "schedule.yaml"
    snippet.write_text(plan.snippet(seeds=3), encoding="utf-8")
    spec = spec_of("--batch-schedule", str(snippet), "--lr", "0.9")
    assert spec.batch_schedule == plan and spec.learning_rate == 0.02
    assert spec.schedule.warmup_steps == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--batch-schedule", "32,16@100"],
            "--batch-schedule stages[1].batch_size must be greater than stages[0].batch_size "
            "(32): a schedule increases (got 16)",
        ),
        (
            ["--batch-schedule", "32,64@x"],
            "--batch-schedule stages must be BATCH[@EXAMPLES],... (e.g. 32,128@40960) "
            "(got '32,64@x')",
        ),
        (["--lr-alpha", "1"], "--lr-alpha needs --batch-schedule (it scales its learning rate)"),
        (
            ["--stage-warmup", "5"],
            "--stage-warmup needs --batch-schedule (it ramps its stages' rates)",
        ),
        (
            ["--batch-schedule", "32,64@10", "--stage-warmup", "-1"],
            "--stage-warmup must be >= 0 steps (got -1)",
        ),
        (["--batch-schedule", "32,64@10", "--lr", "-1"], "--lr must be > 0 (got -1.0)"),
        (
            ["--batch-schedule", "32,66@100", "--strategy", "mirrored:4"],
            "--batch-schedule stages[1].batch_size must be divisible by the 4 replicas on "
            "mirrored:4 (got 66)",
        ),
        (["--batch-schedule", "missing.yaml"], "batch schedule file 'missing.yaml' not found"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        spec_of(*argv)
    assert str(info.value) == message


def test_the_python_api_names_its_arguments() -> None:
    with pytest.raises(FieldError, match=r"^batch_schedule\.stages\[1\]\.batch_size"):
        api.train(batch_schedule="32,16@10", track=False)
    with pytest.raises(FieldError, match=r"^lr_alpha must be finite"):
        api.train(batch_schedule="32,64@10", lr_alpha=float("nan"), track=False)
    with pytest.raises(UsageError, match=r"^lr_alpha needs batch_schedule"):
        api.train(lr_alpha=1.0, track=False)
    with pytest.raises(FieldError, match=r"^stage_warmup_steps must be >= 0"):
        api.train(batch_schedule="32,64@10", stage_warmup_steps=-1, track=False)
    with pytest.raises(UsageError, match=r"^stage_warmup_steps needs batch_schedule"):
        api.train(stage_warmup_steps=3, track=False)


@pytest.mark.slow
def test_a_trial_with_a_growing_batch_is_trained_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = study_here(
        monkeypatch,
        capsys,
        "train",
        "--workload",
        "tabular",
        "--batch-schedule",
        "16,64@320",
        "--lr",
        "0.05",
        "--max-steps",
        "40",
        "--eval-every",
        "10",
        "--target",
        "val_accuracy>=0.999",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps_run"] == 40
    assert summary["environment"]["per_replica_batch"] == 16
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    run = client.get_run(summary["mlflow_run_id"])
    assert run.data.params["batch_schedule"] == "16@0,64@320"
    assert run.data.tags["mlflow.runName"] == "tabular-schedule-16@0,64@320"
    examples = client.get_metric_history(run.info.run_id, "progress/examples")
    assert examples and max(m.value for m in examples) == 320 + 20 * 64
