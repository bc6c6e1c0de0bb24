"""The gradient noise scale from the command line: ``study train --noise-scale`` /
``--no-exact-steps``, the study file's ``noise_scale`` / ``exact_steps`` reaching the worker,
and ``study noise-scale`` (a pilot run and its suggested study)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import yaml

from study.cli import build_parser
from study.commands.train import build_spec
from study.ledger import Ledger, open_storage
from study.results import FINE, NOISE
from tests.cli import study


def test_train_flags_reach_the_spec() -> None:
    parser = build_parser()
    plain = build_spec(parser.parse_args(["train", "--workload", "tabular"]))
    assert (plain.noise_scale, plain.exact_steps) == (False, True)
    args = parser.parse_args(
        ["train", "--workload", "tabular", "--noise-scale", "--no-exact-steps"]
    )
    spec = build_spec(args)
    assert (spec.noise_scale, spec.exact_steps) == (True, False)


def test_train_measures_and_prints_the_noise_scale(tmp_path: Path) -> None:
    common = ["train", "--workload", "tabular", "--workload-option", "rows=1500", "--no-track"]
    common += ["--batch-size", "32", "--lr", "0.1", "--eval-every", "25", "--noise-scale"]
    out = study(*common, "--max-steps", "400", "--target", "val_accuracy>=0.85", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "B_simple = " in out.stdout
    # Not reached in 800 steps: enough measured steps for an interval, read at the end.
    out = study(*common, "--max-steps", "800", "--target", "val_accuracy>=0.99", "--json",
                "--no-exact-steps", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    noise = summary["noise"]
    assert summary["status"] == "not_reached" and noise["step"] == 800
    assert summary["environment"]["replay_steps"] == 0
    assert noise["b_simple_low"] < noise["b_simple"] < noise["b_simple_high"]
    assert 0 < noise["b_simple"] < 1500


def test_train_without_exact_steps_reads_the_cadence(tmp_path: Path) -> None:
    args = ["train", "--workload", "tabular", "--workload-option", "rows=1500", "--no-track",
            "--batch-size", "32", "--lr", "0.1", "--eval-every", "25", "--max-steps", "400",
            "--target", "val_accuracy>=0.85", "--json"]  # fmt: skip
    exact = json.loads(study(*args, cwd=tmp_path).stdout)
    coarse = json.loads(study(*args, "--no-exact-steps", cwd=tmp_path).stdout)
    assert exact["status"] == coarse["status"] == "reached"
    assert coarse["steps_to_target"] % 25 == 0 and coarse["environment"]["replay_steps"] == 0
    assert coarse["steps_to_target"] - 25 < exact["steps_to_target"] <= coarse["steps_to_target"]
    assert exact["environment"]["replay_steps"] > 0 and "noise" not in exact


def test_study_file_settings_reach_every_trial(tmp_path: Path) -> None:
    data = {
        "name": "noisy",
        "workload": "tabular",
        "workload_options": {"rows": 1500},
        "target": "val_accuracy>=0.85",
        "budget": {"max_steps": 400},
        "eval_every": 10,
        "noise_scale": True,
        "exact_steps": False,
        "trials_per_stratum": 2,
        "search_space": {
            "batch_size": [32],
            "learning_rate": {"low": 0.05, "high": 0.2},
            "strategy": ["default"],
        },
    }
    (tmp_path / "noisy.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    out = study("run", "noisy.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "noisy")
    trials = ledger.measurement_rows()
    assert len(trials) == 2
    for _trial, rows in trials:
        assert all(row["step"] % 10 == 0 and FINE not in row for row in rows)
        last = rows[-1]
        assert math.isfinite(last[NOISE + "b_simple"]) and last[NOISE + "b_simple"] > 0
