"""The gradient noise scale from the command line: ``study train --noise-scale`` /
``--no-exact-steps``, the study file's ``noise_scale`` / ``exact_steps`` reaching the worker,
and ``study noise-scale`` (a pilot run and its suggested study)."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from mlflow import MlflowClient

from study import cli
from study.cli import build_parser
from study.commands.train import build_spec
from study.config.hold import DEFAULT_HOLD
from study.config.studyfile import SCHEMA_PATH, load_study_file
from study.ledger import Ledger, open_storage
from study.results import FINE, NOISE
from study.runner.launch import fingerprint
from tests.cli import study
from tests.inprocess import study_here


def test_train_flags_reach_the_spec() -> None:
    parser = build_parser()
    plain = build_spec(parser.parse_args(["train", "--workload", "tabular"]))
    assert (plain.settings.noise_scale, plain.settings.exact_steps) == (False, True)
    args = parser.parse_args(
        ["train", "--workload", "tabular", "--noise-scale", "--no-exact-steps"]
    )
    spec = build_spec(args)
    assert (spec.settings.noise_scale, spec.settings.exact_steps) == (True, False)


def test_train_measures_and_prints_the_noise_scale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["train", "--workload", "tabular", "--workload-option", "rows=1500", "--no-track"]
    common += ["--batch-size", "32", "--lr", "0.1", "--eval-every", "25", "--noise-scale"]
    # Reached with exact steps (the default): replayed to the step, the estimate read there.
    here = (monkeypatch, capsys)
    out = study_here(*here, *common, "--max-steps", "400", "--target", "val_accuracy>=0.85",
                     "--json", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    exact = json.loads(out.stdout)
    assert exact["status"] == "reached" and exact["environment"]["replay_steps"] > 0
    assert exact["noise"]["step"] == exact["steps_to_target"] and exact["noise"]["b_simple"] > 0
    # Not reached in 800 steps without exact steps: enough measured steps for an interval.
    out = study_here(*here, *common, "--max-steps", "800", "--target", "val_accuracy>=0.99",
                     "--no-exact-steps", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    found = re.search(r"B_simple = (\S+) \(95% interval (\S+) to (\S+)\) at step 800", out.stdout)
    assert found, out.stdout
    value, low, high = (float(v) for v in found.groups())
    assert 0 < low < value < high and value < 1500


def test_study_file_settings_reach_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
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
    out = study_here(monkeypatch, capsys, "run", "noisy.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "noisy")
    trials = ledger.measurement_rows()
    assert len(trials) == 2
    for _trial, rows in trials:
        assert all(row["step"] % 10 == 0 and FINE not in row for row in rows)
        last = rows[-1]
        assert math.isfinite(last[NOISE + "b_simple"]) and last[NOISE + "b_simple"] > 0


PILOT_STUDY = {
    "name": "pilot",
    "workload": "tabular",
    "workload_options": {"rows": 1500},
    "target": "val_accuracy>=0.99",  # not reached: the pilot runs its budget and has an interval
    "budget": {"max_steps": 480},
    "eval_every": 40,
    "trials_per_stratum": 3,
    "search_space": {
        "batch_size": [32, 128],
        "learning_rate": {"low": 0.05, "high": 0.2, "scale": "log"},
        "strategy": ["default"],
    },
}


def write_pilot_study(directory: Path) -> Path:
    path = directory / "pilot.yaml"
    path.write_text(yaml.safe_dump(PILOT_STUDY, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pilot.yaml", "--workload", "mnist1d"], "--workload: the study file pilot.yaml sets it"),
        (["pilot.yaml", "--target", "val_loss<=1"], "--target: the study file pilot.yaml sets it"),
        (["pilot.yaml", "--batch-size", "31"], "--batch-size 31: on one replica the noise scale"),
        (["pilot.yaml", "--lr", "-1"], "--lr must be > 0 (got -1.0)"),
        (["pilot.yaml", "--write", "pilot.yaml"], "--write: pilot.yaml exists"),
        (["pilot.yaml", "--write", "nodir/x.yaml"], "--write: directory 'nodir' does not exist"),
        (["pilot.yaml", "--study", "nope"], "--study: no study named 'nope' in this storage"),
        (["pilot.yaml", "--study", "a b", "--write", "x.yaml"], "--study must be letters"),
        (["pilot.yaml", "--study", "..", "--write", "x.yaml"], "not dots alone (it names folders"),
        (["pilot.yaml", "--storage", "x.journal"], "--storage applies only with --study NAME"),
        (["missing.yaml"], "study file 'missing.yaml' not found"),
        (["--workload", "tabular", "--lr", "0"], "--lr must be > 0 (got 0.0)"),
    ],
)
def test_bad_input_is_one_line_and_trains_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    write_pilot_study(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    assert cli.main(["noise-scale", *args, "--no-track"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("study noise-scale: error: ")
    assert message in lines[0]
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "x.yaml").exists()


def test_bad_input_exits_2_as_a_user_sees_it(tmp_path: Path) -> None:
    write_pilot_study(tmp_path)
    out = study("noise-scale", "pilot.yaml", "--model", "cnn", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "study noise-scale: error: --model: the study file pilot.yaml sets it; leave the flag "
        "out (or give no study file)"
    )


def test_pilot_suggests_and_writes_a_study_and_stores_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pilot_study(tmp_path)
    out = study_here(
        monkeypatch, capsys, "noise-scale", "pilot.yaml", "--json", "--write", "suggested.yaml",
        "--study", "next", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    pilot, suggestion = report["pilot"], report["suggestion"]
    # The smallest batch size of the file at the geometric middle of its range.
    assert (pilot["batch_size"], pilot["learning_rate"]) == (32, pytest.approx(0.1))
    assert pilot["steps_run"] == pilot["at_step"] == 480 and report["status"] == "not_reached"
    b_simple = pilot["b_simple"]
    assert pilot["b_simple_low"] < b_simple < (pilot["b_simple_high"] or math.inf)
    # every 40 steps, tightened to the hold window (`Hold.max_gap`) so no crossing goes unseen
    expected, step = [], 0
    while step < 480:
        step = min((step // 40 + 1) * 40, DEFAULT_HOLD.max_gap(step), 480)
        expected.append(step)
    assert [row[0] for row in pilot["curve"]] == expected
    sizes = suggestion["batch_sizes"]
    assert len(sizes) >= 6 and sizes[-1] <= suggestion["train_examples"] < 1500
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes))
    assert sizes[0] <= max(1, b_simple / 8)
    assert sizes[-1] >= b_simple * 8 or sizes[-1] * 2 > suggestion["train_examples"]
    for size in sizes:
        low, high = suggestion["learning_rate_by_batch_size"][str(size)]
        ratio = size / 32
        expected = sorted([0.1 * ratio**0.5, 0.1 * ratio])
        assert [low, high] == pytest.approx(expected, rel=0.01)
    # The written file is a valid study with that grid and range.
    written = yaml.safe_load((tmp_path / "suggested.yaml").read_text(encoding="utf-8"))
    jsonschema.validate(written, json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    config = load_study_file(tmp_path / "suggested.yaml")
    assert config.name == "next" and list(config.space.batch_sizes) == sizes
    assert config.target == load_study_file(tmp_path / "pilot.yaml").target
    rate = config.space.param("learning_rate")
    assert (rate.low, rate.high) == tuple(suggestion["learning_rate"])
    # Stored in the study it created from the file, which `study run` can then continue.
    ledger = Ledger(open_storage(str(tmp_path / "mlruns" / "optuna.journal")), "next")
    assert ledger.notes.pilot().to_stored() == pilot
    assert ledger.require().fingerprint == fingerprint(config)
    # Logged to MLflow like a `study train` run: the noise curve and the pilot.
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    run = client.get_run(report["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["noise_scale"] == "true"
    history = client.get_metric_history(run.info.run_id, "noise/b_simple")
    assert max(history, key=lambda m: m.step).value == pytest.approx(b_simple)
    assert "pilot.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
