"""write_report: self-contained HTML, Markdown with PNGs, CSV and JSON; escaping; thin data."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from study.config.target import Target
from study.report import FORMATS, ScalingReport, build_report, make_figures, write_report
from study.report.build import fmt

TARGET = Target.parse("val_accuracy>=0.6")
EVIL = "<script>alert(1)</script>"
PNG = b"\x89PNG\r\n\x1a\n"


def build(df: pd.DataFrame, **kwargs: Any) -> ScalingReport:
    options = {"study": "synthetic", "accelerators": None, "n_boot": 100, **kwargs}
    return build_report(df, TARGET, **options)


@pytest.fixture(scope="module")
def evil_report(make_table) -> ScalingReport:
    """A healthy study whose study and strategy names are markup."""
    df = make_table(
        strategies=(("default", 1, 0.01), (f"{EVIL}:2", 2, 0.006)), study=EVIL, ratio=1.15
    )
    return build(df, study=EVIL)


@pytest.fixture(scope="module")
def written(evil_report: ScalingReport, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("report")
    return {"out": out, "paths": write_report(evil_report, out)}


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
    }
    assert set(paths) == expected
    assert all(p.parent == out and p.is_file() for p in paths.values())


def test_html_is_self_contained(written) -> None:
    text = (written["out"] / "report.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    for forbidden in ('src="http', "src='http", "<script", "<link", "url(", "@import"):
        assert forbidden not in text
    sources = re.findall(r'<img src="([^"]+)"', text)
    assert len(sources) == 5
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    for section in ("Summary", "Figures", "Tables", "Notes", "How it was made"):
        assert f"<h2>{section}</h2>" in text
    assert "B_noise" in text and "Fitted numbers" in text


def test_html_escapes_user_strings(written) -> None:
    text = (written["out"] / "report.html").read_text(encoding="utf-8")
    assert EVIL not in text
    assert html.escape(EVIL) in text  # the study name
    assert html.escape(f"{EVIL}:2") in text  # the strategy name in the tables
    markdown = (written["out"] / "report.md").read_text(encoding="utf-8")
    # Markdown: raw tags only inside code spans, where they are shown as text.
    assert "<script" not in re.sub(r"`[^`]*`", "", markdown)
    assert "&lt;script>alert(1)&lt;/script>" in markdown  # e.g. in the strategy tables


def test_json_holds_finite_numbers_or_null_and_round_trips(written, evil_report) -> None:
    text = (written["out"] / "report.json").read_text(encoding="utf-8")

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-JSON constant {constant} in report.json")

    data = json.loads(text, parse_constant=refuse)
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    for value in _leaves(data):
        assert value is None or isinstance(value, (str, bool, int)) or math.isfinite(value)
    fit = data["noise_scale"]
    assert fit["ok"] and fit["b_noise"] == pytest.approx(evil_report.noise_scale.b_noise)
    assert fit["s_min"] > 0 and fit["e_min"] > 0 and len(fit["b_noise_ci"]) == 2
    assert data["regimes"]["perfect_end"] == evil_report.regimes.perfect_end
    assert data["lr_power_law"]["alpha"] == pytest.approx(0.5, abs=0.05)
    assert len(data["lr_power_law"]["alpha_ci"]) == 2
    rec = data["recommendation"]
    assert rec["ok"] and rec["accelerators"] == 8 and rec["batch_size"] > 0
    assert {"step_speedup", "time_speedup", "learning_rate"} <= set(rec)
    assert [row["batch_size"] for row in data["batch_sizes"]] == list(
        evil_report.steps["batch_size"]
    )
    assert data["target"] == {
        "text": "val_accuracy>=0.6",
        "metric": "val_accuracy",
        "op": ">=",
        "threshold": 0.6,
    }


def test_markdown_references_png_files_that_exist(written) -> None:
    out = written["out"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(images) == 5
    for image in images:
        assert not Path(image).is_absolute() and image.endswith(".png")
        assert (out / image).read_bytes().startswith(PNG)
    assert "## Notes" in markdown and "| batch size |" in markdown


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


def test_only_the_asked_formats_are_written(evil_report, tmp_path) -> None:
    paths = write_report(evil_report, tmp_path / "a", ["json"])
    assert list(paths) == ["report.json"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["report.json"]
    paths = write_report(evil_report, tmp_path / "b", ["html"])
    assert list(paths) == ["report.html"]  # figures are embedded, no PNG files
    with pytest.raises(ValueError, match="unknown report format"):
        write_report(evil_report, tmp_path / "c", ["pdf"])
    assert FORMATS == ("html", "md", "csv", "json")


def test_figures_use_no_pyplot_state(evil_report) -> None:
    plt.close("all")
    figures = make_figures(evil_report)
    assert set(figures) == {
        "steps_to_result",
        "examples_to_result",
        "best_lr",
        "feasible_region",
        "time_to_result",
    }
    assert plt.get_fignums() == []
    steps = figures["steps_to_result"].axes[0]
    assert steps.get_xlabel() == "global batch size" and steps.get_ylabel() == "steps to result"
    assert steps.get_xscale() == "log" and steps.get_yscale() == "log"
    assert figures["best_lr"].axes[0].get_ylabel() == "best learning rate"


# ------------------------------------------------------------------------------- thin data


@pytest.fixture(scope="module")
def thin_reports(make_table) -> dict[str, ScalingReport]:
    two = make_table(batch_sizes=(32, 64), ratio=1.15)
    unreached = make_table(batch_sizes=(8, 16, 32, 64), ratio=1.15)
    unreached.loc[unreached["batch_size"] == 64, "val_accuracy"] = 0.2
    running = make_table(batch_sizes=(8, 16, 32), ratio=1.15)
    running.loc[running["trial"] == 0, "state"] = "running"
    return {
        "two batch sizes": build(two),
        "never reached": build(unreached),
        "running": build(running, state="running"),
        "metric missing": build_report(
            two, Target.parse("val/f1>=0.9"), study="synthetic", accelerators=None
        ),
        "empty": build(two.iloc[:0]),
    }


@pytest.mark.parametrize(
    ("case", "phrase"),
    [
        ("two batch sizes", "Only 2 batch size(s) (32 and 64) reached the target"),
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


def test_fmt_gives_readable_numbers() -> None:
    assert fmt(1170.0) == "1170"
    assert fmt(0.017168) == "0.0172"
    assert fmt(396.78) == "397"
    assert fmt(20992.0) == "20,992" and fmt(1e12) == "1.00e+12"
    assert fmt(22.406) == "22.4"
    assert fmt(math.inf) == "inf"
    assert fmt(math.nan) == "-" and fmt(None) == "-"
    assert fmt(3e-7) == "3.00e-07"


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
