"""`study probe NAME`: seconds per step per (batch size, strategy), stored with the study and
used by `study report` (a few real runs of the tabular workload; the rest without TensorFlow)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from study.cli import main as cli
from study.commands.probe import (
    format_table,
    hardware_text,
    merge_rows,
    probe_row,
    probe_spec,
    study_config,
)
from study.config.space import Stratum
from study.config.target import Target
from study.ledger import Ledger, StudyRecord, ThroughputRow
from study.results import TrialResult, TrialState
from tests.fakes import finished_trial, rising_curve, write_ledger

NAME = "probed"
STUDY_YAML = f"""\
name: {NAME}
workload: tabular
workload_options: {{rows: 2000}}
target: "val_accuracy>=0.9"
budget: {{max_steps: 4000}}
trials_per_stratum: 3
search_space:
  batch_size: [16, 32, 64, 128]
  learning_rate: {{low: 1.0e-2, high: 0.3, scale: log}}
  strategy: [default, "mirrored:2"]
"""
TARGET = Target.parse("val_accuracy>=0.9")


def create(journal: Path, *, trials: bool = False, **record: object) -> Ledger:
    """The study (with finished trials at every batch size on default when ``trials``)."""
    fields = {"config_text": STUDY_YAML, "config_source": "probed.yaml", "trials_total": 24}
    ledger = Ledger.open(str(journal), NAME)
    done = []
    if trials:
        for batch in (16, 32, 64, 128):
            for number, lr in enumerate((0.03, 0.1, 0.3, 0.01)):  # 16: the model needs 13
                needed = 100 * (1 + 48 / batch) * (1 + abs(math.log(lr / 0.1)))
                curve = rising_curve(batch, needed)
                done.append(finished_trial(Stratum(batch, "default"), number, lr, curve, TARGET))
    write_ledger(ledger, StudyRecord(NAME, **{**fields, **record}), done)
    return ledger


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = cli([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path / "j.journal"


def test_probe_times_every_pair_and_stores_it_with_the_study(journal: Path, capsys) -> None:
    create(journal)

    status, out, err = run(
        capsys, "probe", NAME, "--storage", journal, "--batch-sizes", 16, 32,
        "--strategies", "default", "mirrored:2", "--steps", 5, "--repeats", 2, "--json",
    )  # fmt: skip

    assert status == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["batch_size"], r["strategy"], r["replicas"]) for r in rows] == [
        (16, "default", 1),
        (32, "default", 1),
        (16, "mirrored:2", 2),
        (32, "mirrored:2", 2),
    ]
    for row in rows:
        assert len(row["samples"]) == 2 and all(s > 0 for s in row["samples"])
        assert row["seconds_low"] <= row["seconds_per_step"] <= row["seconds_high"]
        assert (row["steps"], row["repeats"]) == (5, 2)
        assert row["measured_at"].endswith("UTC") and "CPUs" in row["hardware"]
        assert row["learning_rate"] == 0.01  # no trial yet: the low end of the searched range
    assert rows[2]["devices"].count("cpu") == 2
    stored = Ledger.open(str(journal), NAME, create=False)
    assert [row.to_stored() for row in stored.notes.throughput()] == rows
    assert stored.strata() == [] and stored.record().trials_total == 24  # no trial recorded

    assert "probing batch size 32 on mirrored:2" in err  # progress goes to stderr


def test_the_report_predicts_time_to_result_from_the_stored_probe(journal: Path, capsys) -> None:
    ledger = create(journal, trials=True)
    ledger.notes.set_throughput(
        [
            ThroughputRow(b, "default", replicas=1, repeats=3, steps=100,
                          seconds_per_step=0.001 * (1 + b / 32),
                          measured_at="2026-11-30 09:40 UTC", hardware="a CPU (2 CPUs)")
            for b in (16, 32, 64, 128, 256)
        ]
    )  # fmt: skip
    out = journal.parent / "out"

    status, _, err = run(
        capsys, "report", NAME, "--storage", journal, "--out", out, "--format", "json",
        "--no-mlflow",
    )  # fmt: skip

    assert status == 0, err
    data = json.loads((out / "report.json").read_text())
    time = data["time_to_result"]
    assert time["ok"] and time["hardware"] == "a CPU (2 CPUs)" and time["repeats"] == "3"
    sources = {row["batch_size"]: row["steps_source"] for row in time["table"]}
    assert sources[64] == "measured" and sources[256] == "fit, extrapolated"
    best = time["best"]
    measured = [r for r in time["table"] if not r["extrapolated"]]
    assert best["time_to_result"] == min(r["time_to_result"] for r in measured)
    assert best["strategy"] == "default" and not best["extrapolated"]
    assert "reaches the target in the least wall time" in data["summary"]
    assert data["predicted_noise"]["ok"] is False  # no pilot, no measuring trial
    assert "study noise-scale" in data["predicted_noise"]["sentences"][0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--steps", 0), "--steps must be at least 1 (got 0)"),
        (("--repeats", 0), "--repeats must be at least 1 (got 0)"),
        (("--batch-sizes", 15, "--strategies", "mirrored:2"), "--batch-sizes"),
        (("--strategies", "mirored:2"), "unknown strategy 'mirored:2'"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(journal: Path, capsys, args, message) -> None:
    create(journal)

    status, _, err = run(capsys, "probe", NAME, "--storage", journal, *args)

    assert status == 2 and message in err and len(err.strip().splitlines()) == 1
    assert Ledger.open(str(journal), NAME, create=False).notes.throughput() == []


def test_an_unknown_or_imported_study_cannot_be_probed(journal: Path, capsys) -> None:
    status, _, err = run(capsys, "probe", "nobody", "--storage", journal)
    assert status == 2 and "no study named 'nobody'" in err
    assert not journal.exists()  # nothing created

    with pytest.raises(Exception, match="imported and has no workload"):
        study_config("imported", None, None)


def test_a_probe_run_is_the_study_trial_that_cannot_meet_its_target() -> None:
    config = study_config(NAME, STUDY_YAML, "probed.yaml")

    spec = probe_spec(config, 256, "mirrored:4", 40, 0.05)

    assert (spec.batch_size, spec.strategy, spec.learning_rate) == (256, "mirrored:4", 0.05)
    assert spec.target.metric == "val_accuracy" and spec.target.threshold == math.inf
    assert not spec.target.met_by({"val_accuracy": 1.0})
    assert spec.settings.budget.max_steps == 40 and spec.settings.cadence.next_step(0) == 40
    assert not spec.settings.exact_steps and not spec.settings.noise_scale
    assert spec.workload == "tabular" and spec.workload_options == {"rows": 2000}


def test_a_row_is_the_median_of_the_runs_that_trained_every_step() -> None:
    spec = probe_spec(study_config(NAME, STUDY_YAML, "p.yaml"), 64, "default", 100, 0.1)
    env = {"replicas": 1, "devices": "/cpu:0", "tensorflow": "2.21.0"}

    def ran(seconds: float, steps: int = 100, state=TrialState.NOT_REACHED) -> TrialResult:
        return TrialResult(state=state, steps_run=steps, train_seconds=seconds, environment=env)

    row = probe_row(spec, [ran(0.21), ran(0.20), ran(0.25), ran(0.01, steps=3)])

    assert row.seconds_per_step == pytest.approx(0.0021)
    assert (row.seconds_low, row.seconds_high) == pytest.approx((0.002, 0.0025))
    assert len(row.samples) == 3 and row.error is None and "error" not in row.to_stored()
    failed = probe_row(spec, [TrialResult(state=TrialState.FAILED, error="Traceback\nOOM")])
    assert failed.seconds_per_step is None and failed.error == "failed: OOM"
    assert failed.replicas == 1  # from the strategy when no run reported it


def test_merging_keeps_other_pairs_and_sorts_by_strategy_then_batch() -> None:
    old = [ThroughputRow(64, "default", steps=1), ThroughputRow(8, "x")]
    new = [ThroughputRow(64, "default", steps=2), ThroughputRow(16, "default")]

    merged = merge_rows(old, new)

    assert [(r.batch_size, r.strategy, r.steps) for r in merged] == [
        (16, "default", None),
        (64, "default", 2),
        (8, "x", None),
    ]


def test_hardware_names_gpus_before_the_cpu() -> None:
    assert hardware_text({"cpus": 2, "cpu_model": "AMD EPYC", "gpus": []}) == "AMD EPYC (2 CPUs)"
    gpu = {"cpus": 8, "cpu_model": "Xeon", "gpus": ["GPU 0: A100"]}
    assert hardware_text(gpu) == "GPU 0: A100 (8 CPUs)"


def test_the_table_shows_the_median_its_spread_and_failures() -> None:
    facts = {"steps": 100, "repeats": 3, "hardware": "AMD EPYC (2 CPUs)", "measured_at": "now"}
    ok = ThroughputRow(64, "default", 1, 0.002, seconds_low=0.0018, seconds_high=0.0025)
    failed = ThroughputRow(64, "mirrored:2", 2, None, error="failed: OOM")

    text = format_table("s", [ok, failed], facts)

    assert text.startswith("probe of s: 100 steps x 3 repeat(s) per batch size and strategy")
    assert "0.0018 to 0.0025" in text and "32,000" in text  # examples per second
    assert "no measurement (failed: OOM)" in text
