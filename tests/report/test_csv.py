"""write_csv: the report's tables as CSV files that load back."""

from __future__ import annotations

import math

import pandas as pd

from study.report.csv import write_csv

EVIL = "<script>alert(1)</script>"


def test_csv_files_load_back(written, evil_report) -> None:
    out = written["out"]
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == len(evil_report.trials)
    steps = pd.read_csv(out / "steps_to_result.csv")
    assert list(steps["steps_to_result"]) == list(evil_report.steps["steps_to_result"])
    assert set(pd.read_csv(out / "by_strategy.csv")["strategy"]) == {"default", f"{EVIL}:2"}
    assert len(pd.read_csv(out / "throughput.csv")) == len(evil_report.throughput)
    assert len(pd.read_csv(out / "measurements.csv")) == len(evil_report.table)
    assert len(pd.read_csv(out / "steps_by_strategy.csv")) == len(evil_report.steps_by_strategy)


def test_a_target_never_met_is_written_as_inf(make_report, make_table, tmp_path) -> None:
    df = make_table(batch_sizes=(8, 16, 32, 64), ratio=1.15)
    df.loc[df["batch_size"] == 64, "val_accuracy"] = 0.2

    paths = write_csv(make_report(df), tmp_path)

    assert sorted(paths) == [
        "by_strategy.csv",
        "measurements.csv",
        "steps_by_strategy.csv",
        "steps_to_result.csv",
        "throughput.csv",
        "trials.csv",
    ]
    steps = pd.read_csv(paths["steps_to_result.csv"]).set_index("batch_size")
    assert math.isinf(steps.loc[64, "steps_to_result"])
    assert ",inf," in paths["steps_to_result.csv"].read_text()
