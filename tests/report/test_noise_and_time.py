"""The report's predicted B_simple (next to the fitted B_noise) and its time to result from the
throughput probe, in every format."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from study.analysis.predicted_noise import B_SIMPLE, B_SIMPLE_HIGH, B_SIMPLE_LOW, PILOT, TRIALS
from study.report import ScalingReport, write_report
from study.report.html import render_html
from study.report.json import render_json
from study.report.markdown import render_markdown
from study.report.noise_prose import NOISE_CAVEAT
from study.report.prose import answer, how_it_was_made, summary_lines
from study.report.tables import report_tables
from tests.report.conftest import PILOT as PILOT_RUN
from tests.report.conftest import PROBE


def tables(report: ScalingReport) -> dict:
    return {t.title: t for t in report_tables(report)}


@pytest.fixture(scope="module")
def noisy_report(make_table, make_report) -> ScalingReport:
    """The synthetic study whose trials measured B_simple (growing with the step, from 60)."""
    df = make_table()
    estimate = np.where(df["step"] > 0, 60 + 0.3 * df["step"], np.nan)
    df = df.assign(
        **{B_SIMPLE: estimate, B_SIMPLE_LOW: 0.8 * estimate, B_SIMPLE_HIGH: 1.25 * estimate}
    )
    return make_report(df)


def test_the_pilot_is_shown_next_to_the_fit_with_both_intervals(facts_report) -> None:
    noise = tables(facts_report)["Noise scale: predicted and fitted"]

    assert facts_report.predicted_noise.source == PILOT
    assert noise.rows[0][:3] == ["B_simple (predicted, pilot run)", "150", "110 to 210"]
    assert "batch size 16 on default, at step 580 of 600" in noise.rows[0][3]
    fit = facts_report.noise_scale
    assert (
        noise.rows[-1][0] == "B_noise (model of every trial)"
        and noise.rows[-1][2].count(" to ") == 1
    )
    assert noise.rows[-1][1] != "not fitted" and fit.b_noise_ci is not None
    agreement = facts_report.noise_agreement
    overlap = fit.b_noise_ci[0] <= 210 and fit.b_noise_ci[1] >= 110
    assert agreement.ok and agreement.agree == overlap
    assert ("agree: their intervals overlap" in noise.intro) == overlap
    assert noise.intro.endswith(NOISE_CAVEAT)
    assert "Hessian is a multiple of the identity" in NOISE_CAVEAT


def test_a_pilot_far_from_the_fit_is_said_not_to_agree_by_a_factor(make_report, table) -> None:
    far = {**PILOT_RUN, "b_simple": 2000.0, "b_simple_low": 1500.0, "b_simple_high": 2500.0}
    report = make_report(table, pilot=far)

    intro = tables(report)["Noise scale: predicted and fitted"].intro

    assert not report.noise_agreement.agree
    ratio = 2000.0 / report.noise_scale.b_noise
    assert f"B_simple is {ratio:.3g} times B_noise" in intro
    assert "the nearest ends of the intervals lie a factor of" in intro
    assert "more than the order of magnitude" in intro  # 2000 / ~128 > 10
    assert "does not agree with B_noise" in "\n".join(summary_lines(report))


def test_trials_that_measured_it_predict_it_per_batch_size(noisy_report) -> None:
    noise = tables(noisy_report)["Noise scale: predicted and fitted"]
    predicted = noisy_report.predicted_noise

    assert predicted.source == TRIALS and predicted.batch_sizes == 8
    per_batch = [row for row in noise.rows if row[0].startswith("B_simple at batch size")]
    assert len(per_batch) == 8 and all("target first met" in row[3] for row in per_batch)
    assert predicted.b_simple == pytest.approx(np.median(predicted.estimates["b_simple"]))
    assert "the median over the best trials of 8 batch sizes" in noise.rows[0][3]
    assert "(from the trials)" in answer(noisy_report)


def test_without_a_pilot_or_measuring_trials_the_report_says_how_to_get_one(report) -> None:
    noise = tables(report)["Noise scale: predicted and fitted"]

    assert noise.rows == []
    assert "study noise-scale" in noise.empty and "noise_scale: true" in noise.empty
    assert "study noise-scale" in render_html(report, pngs={})
    assert "noise_scale: true" in render_markdown(report)
    data = json.loads(render_json(report))["predicted_noise"]
    assert data["ok"] is False and "noise_scale: true" in data["sentences"][0]


def test_the_time_to_result_table_names_the_probe_and_the_fastest_choice(facts_report) -> None:
    time = tables(facts_report)["Time to result (throughput probe)"]
    model = facts_report.time_model

    assert model.ok and len(time.rows) == len(PROBE) + 5  # and 5 rows extrapolated to 8 replicas
    assert "2026-11-30 09:40 UTC, 2 x Intel Xeon (CPU), 3 repeats of 100 steps" in time.intro
    best = model.best
    assert time.rows[0][:2] == [str(best["batch_size"]), best["strategy"]]
    assert time.rows[0][-1] == "least wall time"
    finite = model.table[~model.table["extrapolated"]]
    assert best["time_to_result"] == finite["time_to_result"].min()
    assert f"batch size {best['batch_size']} on {best['strategy']} reaches the target" in answer(
        facts_report
    )
    assert "Rows for 8 replicas" not in answer(facts_report)  # the table says it
    flagged = [row for row in time.rows if row[-1].startswith("extrapolated")]
    assert len(flagged) == 5 and "lower bounds on time, not predictions" in time.intro
    rows = {row[0]: row for row in tables(facts_report)["Recommendation"].rows}
    assert "least wall time to the target (throughput probe)" in rows


def test_a_batch_size_the_study_did_not_measure_takes_its_steps_from_the_fit(facts_report) -> None:
    rows = facts_report.time_model.table
    unmeasured = rows[(rows["batch_size"] == 2048) & ~rows["extrapolated"]]

    assert set(unmeasured["steps_source"]) == {"fit, extrapolated"}
    expected = facts_report.noise_scale.predict_steps(2048.0)
    assert np.allclose(unmeasured["steps_to_result"], expected)


def test_without_a_probe_the_report_says_how_to_make_one(report) -> None:
    time = tables(report)["Time to result (throughput probe)"]

    assert time.rows == [] and "`study probe NAME`" in time.empty
    assert "least wall time" not in answer(report)
    assert "study probe NAME" in render_html(report, pngs={})


def test_the_probe_replaces_the_trials_timings_in_the_recommendation(make_report, table) -> None:
    # The synthetic trials run mirrored:2 at 0.006 s per step at batch 8; the probe at 8 replicas
    # makes the recommendation's wall-time factor its own.
    probe = [
        {"batch_size": b, "strategy": s, "replicas": r, "seconds_per_step": t}
        for b, s, r, t in ((8, "default", 1, 0.01), (64, "mirrored:8", 8, 0.0025))
    ]
    report = make_report(table, probe=probe)

    rec = report.recommendation
    assert rec.batch_size == 64 and rec.time_source == "throughput"
    assert rec.strategy == "mirrored:8"
    assert rec.time_speedup == pytest.approx(rec.step_speedup * 0.01 / 0.0025)


def test_json_and_csv_carry_both_sections(facts_report, tmp_path) -> None:
    data = json.loads(render_json(facts_report))

    assert data["predicted_noise"]["source"] == "pilot"
    assert data["predicted_noise"]["interval"] == [110.0, 210.0]
    assert data["predicted_noise"]["b_noise"] == pytest.approx(facts_report.noise_scale.b_noise)
    assert data["predicted_noise"]["agreement"]["ok"] is True
    time = data["time_to_result"]
    assert time["ok"] and time["best"]["strategy"] == facts_report.time_model.best["strategy"]
    assert len(time["table"]) == len(facts_report.time_model.table)
    paths = write_report(facts_report, tmp_path, ["csv"])
    assert len(pd.read_csv(paths["time_to_result.csv"])) == len(facts_report.time_model.table)
    assert pd.read_csv(paths["predicted_noise.csv"])["b_simple"].tolist() == [150.0]


def test_markdown_shows_both_tables(facts_report) -> None:
    markdown = render_markdown(facts_report)

    assert "### Noise scale: predicted and fitted" in markdown
    assert "| B_simple (predicted, pilot run) | 150 | 110 to 210 |" in markdown
    assert "### Time to result (throughput probe)" in markdown


def test_the_strategies_table_shows_validation_metrics_not_noise_estimates(noisy_report) -> None:
    headers = tables(noisy_report)["Strategies (seed experiments)"].headers

    assert "final val_accuracy" in headers
    assert not [h for h in headers if "noise/" in h]


def test_how_it_was_made_names_the_probe_and_the_pilot(facts_report, report) -> None:
    made = dict(how_it_was_made(facts_report))

    assert (
        made["throughput probe"]
        == "2026-11-30 09:40 UTC, 2 x Intel Xeon (CPU), 3 repeats of 100 steps"
    )
    assert made["predicted B_simple"].startswith("the pilot run (batch size 16 on default")
    assert "throughput probe" not in dict(how_it_was_made(report))


def test_an_interval_without_an_upper_end_agrees_only_loosely(make_report, table) -> None:
    open_ended = {**PILOT_RUN, "b_simple": 14.0, "b_simple_low": 5.6, "b_simple_high": None}
    report = make_report(table, pilot=open_ended)

    intro = tables(report)["Noise scale: predicted and fitted"].intro

    assert report.noise_agreement.agree
    assert (
        "agree only loosely: their intervals overlap because B_simple's has no upper end" in intro
    )
    assert "5.6 to inf" in intro
    assert "agrees loosely with B_noise" in "\n".join(summary_lines(report))
