"""CBS(t) in the report (`study.ext.branch.report`): the figure drawn into a given Axes and
registered as the report section's figure (`study.report.figures.draw`), the JSON record, the sentences (trend, B_noise compared, cost) and the
derived schedule, from synthetic branches."""

from __future__ import annotations

import copy
import json
import math

import matplotlib
import pandas as pd
import pytest

from study.config.studyfile import parse_study
from study.ext.branch.report import CbsReport, cbs_report, draw_cbs
from study.report.figures import caption, draw
from tests.config.test_studyfile import BASE
from tests.ext.branch.test_cbs import branches, references

matplotlib.use("Agg")

TRUTH = {0: 40.0, 1: 90.0, 2: 200.0}
PLAN = {
    "b0": 16,
    "learning_rate": 0.02,
    "alpha": 0.5,
    "batch_sizes": [16, 32, 64, 128, 256, 512],
    "why": "the study's fitted lr* ~ B^alpha (alpha 0.5) scales the reference's rate",
}
REFERENCE = {"run_id": "r", "steps": 1000, "examples": 16000, "examples_to_target": 8000}


def report(b_noise: tuple[float, float, float] | None = (150.0, 100.0, 300.0)) -> CbsReport:
    data = copy.deepcopy(BASE)
    data["branch"] = {"tolerance": {"loss": 0.02, "basis": "loss"}}
    config = parse_study(data, "x.yaml")
    study = pd.DataFrame({"steps_run": [4000], "examples_run": [64000]})
    return cbs_report(
        branches(TRUTH),
        references(TRUTH),
        PLAN,
        REFERENCE,
        config,
        study_trials=study,
        b_noise=b_noise,
    )


def test_the_figure_draws_cbs_b_simple_and_b_noise_into_a_given_axes() -> None:
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    cbs = report()
    assert draw_cbs(ax, cbs) is ax
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"CBS(t)", "B_simple(t)", "B_noise 150"} <= set(labels)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "CBS(t)" in caption("cbs")

    class Holder:  # what `draw` is given: a report with a cbs section
        def section(self, key: str) -> CbsReport | None:
            return cbs if key == "cbs" else None

    other = Figure().subplots()
    draw("cbs", other, Holder())
    assert len(other.lines) == len(ax.lines)


def test_sentences_say_the_trend_the_comparison_and_the_cost() -> None:
    lines = report().lines()
    assert lines[0].startswith("Learning rates of the branches: the study's fitted")
    assert "CBS(t) over 3 checkpoints rises" in lines[1]
    assert "B_noise 150 (100 to 300)" in lines[2] and "B_noise / CBS = 0.75" in lines[2]
    assert lines[2].startswith("At 4,000 examples CBS 200 (200 to 200) agrees with")
    cost = lines[3]
    assert "runs of batch 16 to the target" in cost and "of the study's 64,000" in cost
    assert len(report(b_noise=None).lines()) == 3  # no fit: no comparison


def test_the_json_record_is_plain_data_with_the_schedule() -> None:
    data = report().to_dict()
    text = json.dumps(data, allow_nan=False)  # inf and NaN became null
    back = json.loads(text)
    assert [round(r["cbs"]) for r in back["curve"]] == [40, 90, 200]
    assert back["trend"]["rises"] is True
    assert back["cost"]["reference_runs"] == pytest.approx(back["cost"]["examples"] / 8000)
    stages = back["schedule"]["stages"]
    assert stages[0] == {"from_examples": 0, "batch_size": 16}
    assert [s["batch_size"] for s in stages] == sorted({s["batch_size"] for s in stages})
    assert all(s["batch_size"] <= 200 for s in stages)  # rounded down to the grid
    assert not math.isnan(back["b_noise"][0])


def test_the_figure_marks_the_critical_batch_size_at_the_target() -> None:
    from matplotlib.figure import Figure

    base = report()
    cbs = CbsReport(
        {**PLAN, "target_examples": 6000}, base.reference, base.curve, base.branches,
        base.trend, base.cost, base.schedule, base.b_noise, (180.0, 120.0, 260.0),
    )  # fmt: skip
    ax = draw_cbs(Figure().subplots(), cbs)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "critical batch size 180" in labels
    assert cbs.to_dict()["critical_batch"] == [180.0, 120.0, 260.0]
    assert any("critical batch size 180 (120 to 260)" in line for line in cbs.lines())
