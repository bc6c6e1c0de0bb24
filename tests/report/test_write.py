"""write_report: every format, only the asked ones; thin data and the confidence reach them all."""

from __future__ import annotations

import html
import json
import re

import pytest

from study.config.target import Target
from study.report import FORMATS, ScalingReport, write_report


def test_every_format_is_written(written) -> None:
    out, paths = written["out"], written["paths"]
    expected = {
        "report.html",
        "report.md",
        "report.json",
        "trials.csv",
        "steps_to_result.csv",
        "steps_by_strategy.csv",
        "by_strategy.csv",
        "throughput.csv",
        "measurements.csv",
        "steps_to_result.png",
        "examples_to_result.png",
        "best_lr.png",
        "feasible_region.png",
        "time_to_result.png",
        "cross_check.png",
    }
    assert set(paths) == expected
    assert all(p.parent == out and p.is_file() for p in paths.values())


def test_only_the_asked_formats_are_written(evil_report, tmp_path) -> None:
    paths = write_report(evil_report, tmp_path / "a", ["json"])
    assert list(paths) == ["report.json"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["report.json"]
    paths = write_report(evil_report, tmp_path / "b", ["html"])
    assert list(paths) == ["report.html"]  # figures are embedded, no PNG files
    with pytest.raises(ValueError, match="unknown report format"):
        write_report(evil_report, tmp_path / "c", ["pdf"])
    assert FORMATS == ("html", "md", "csv", "json")


def test_a_non_default_confidence_changes_every_label(make_report, make_table, tmp_path) -> None:
    # Perfect scaling: B_noise is unbounded from above, so its interval note appears too.
    df = make_table(b_noise=1e6, batch_sizes=(8, 16, 32, 64), ratio=1.15)
    write_report(make_report(df, confidence=0.9), tmp_path, ["html", "md", "json"])

    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    summary = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["summary"]
    text = re.sub(r"data:image/png;base64,[^\"]+", "", page)
    for written in (text, markdown, summary):
        assert "95%" not in written
        assert "90% intervals" in written
    for written in (text, markdown):
        assert "90% interval" in written  # the tables' header
        assert "(90% CI " in written  # the cross-check's profile intervals
        assert re.search(r"The 90% interval of B_noise (reaches|has no upper end)", written)


@pytest.fixture(scope="module")
def thin_reports(make_table, make_report) -> dict[str, ScalingReport]:
    two = make_table(batch_sizes=(32, 64), ratio=1.15)
    unreached = make_table(batch_sizes=(8, 16, 32, 64), ratio=1.15)
    unreached.loc[unreached["batch_size"] == 64, "val_accuracy"] = 0.2
    running = make_table(batch_sizes=(8, 16, 32), ratio=1.15)
    running.loc[running["trial"] == 0, "state"] = "running"
    return {
        "two batch sizes": make_report(two),
        "never reached": make_report(unreached),
        "running": make_report(running, state="running"),
        "metric missing": make_report(two, Target.parse("val/f1>=0.9")),
        "empty": make_report(two.iloc[:0]),
    }


@pytest.mark.parametrize(
    ("case", "phrase"),
    [
        ("two batch sizes", "no answer yet: fewer than 3 batch sizes reached the target (2)"),
        ("never reached", "Batch size 64 (6 trials) never reached the target"),
        ("running", "The study is still running (1 trial(s) in progress)"),
        ("metric missing", "The target metric val/f1 was never measured"),
        ("empty", "has no measurements yet"),
    ],
)
def test_thin_data_notes_reach_every_format(thin_reports, tmp_path, case, phrase) -> None:
    report = thin_reports[case]
    assert any(phrase in n for n in report.notes)
    paths = write_report(report, tmp_path)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.escape(phrase) in page
    assert phrase.replace("<", "&lt;") in (tmp_path / "report.md").read_text(encoding="utf-8")
    data = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert any(phrase in n for n in data["notes"])
    assert "report.html" in paths and "trials.csv" in paths
