"""The report's tables as text, shared by HTML and Markdown."""

from __future__ import annotations

import math

from study.report.formatting import fmt
from study.report.formatting import fmt as fmt_number
from study.report.tables import cross_check_rows, report_tables

TITLES = [
    "The answers (one model of every trial)",
    "Per batch size (pooled over strategies)",
    "Per batch size and strategy",
    "Strategies (seed experiments)",
    "Throughput",
    "Time to result (throughput probe)",
    "Noise scale: predicted and fitted",
    "Recommendation",
    "Cross-check: the best trial of each batch size",
]


def test_every_table_in_order_with_one_row_per_record(report) -> None:
    tables = report_tables(report)

    assert [t.title for t in tables] == TITLES
    answers, steps, by_strategy, strategies, throughput, time, noise, fitted, _ = tables
    assert len(steps.rows) == len(report.steps) == 8
    assert len(by_strategy.rows) == len(report.steps_by_strategy)
    assert len(throughput.rows) == len(report.throughput)
    assert all(len(row) == len(t.headers) for t in tables for row in t.rows)
    assert steps.headers[:3] == ["batch size", "steps to result", "model S(B)"]
    assert steps.rows[0][0] == "8" and steps.rows[-1][0] == "1024"
    assert steps.text_columns == (4,) and fitted.text_columns == (0, 3)
    assert strategies.intro.startswith("Per strategy and batch size")
    assert strategies.headers[-2:] == ["final val_accuracy", "final val_loss"]
    assert time.rows == [] and time.empty.startswith("No throughput probe: `study probe NAME`")
    assert noise.rows == [] and "noise_scale: true" in noise.empty
    named = {row[0]: row for row in answers.rows}
    assert named["B_noise"][1] == fmt_number(report.answers.b_noise.estimate)
    assert "perfect scaling ends at" in named and answers.headers[2] == "95% interval"
    model = report.answers.surrogate
    bottom = named["learning-rate response's bottom"]
    assert bottom[1] == model.bottom in ("smooth", "sharp")
    assert bottom[3].startswith(f"curvature {fmt(math.exp(model.value('log_c_low')))} below")


def test_every_table_of_intervals_names_them_by_the_confidence(report, make_report, table) -> None:
    assert report_tables(report)[-1].headers[2] == "95% interval"

    narrow = make_report(table, confidence=0.9)

    assert report_tables(narrow)[-1].headers == ["quantity", "estimate", "90% interval", "comment"]
    assert report_tables(narrow)[0].headers[2] == "90% interval"


def test_the_recommendation_table_states_the_model_answer(report) -> None:
    tables = {t.title: t for t in report_tables(report)}
    rows = {row[0]: row[1:] for row in tables["Recommendation"].rows}
    answers = report.answers

    assert rows["recommended batch size (8 accelerators)"][0] == str(
        int(answers.recommended_batch.estimate)
    )
    assert rows["recommended learning rate"][0] == fmt(answers.recommended_lr.estimate)
    speed = answers.step_speedup
    assert rows["expected speed-up in steps"][:2] == [
        f"{fmt(speed.estimate)}x",
        f"{fmt(speed.low)} to {fmt(speed.high)}",
    ]


def test_the_cross_check_reads_the_best_trials_alone(report) -> None:
    rows = {row[0]: row[1:] for row in cross_check_rows(report)}
    fit = report.cross_check.noise_scale

    estimate, interval, _ = rows["B_noise"]
    assert estimate == fmt(fit.b_noise) and fit.method == "profile likelihood"
    assert interval == f"{fmt(fit.b_noise_ci[0])} to {fmt(fit.b_noise_ci[1])}"
    assert rows["fit residual (RMS of log steps)"][2] == "profile likelihood intervals"
    assert rows["alpha in lr* = c B^alpha"][2] == "rule: square-root"


def test_the_answers_table_says_why_there_is_no_answer(make_report, make_table) -> None:
    report = make_report(make_table(batch_sizes=(32, 64)))

    answers = report_tables(report)[0]
    assert answers.rows == [
        [
            "model of every trial",
            "no answer yet",
            "",
            "fewer than 3 batch sizes reached the target (2)",
        ]
    ]
    rows = cross_check_rows(report)
    assert rows[0] == (
        "noise-scale fit",
        "not fitted",
        "",
        "fewer than 3 batch sizes reached the target (2)",
    )
    assert rows[-1][:2] == ("learning-rate power law", "not fitted")


def test_the_answers_table_shows_the_model_free_reading_beside_the_model(report) -> None:
    rows = {row[0]: row for row in report_tables(report)[0].rows}
    free = report.cross_check.model_free

    assert free.ok
    assert rows["perfect scaling ends at"][3] == f"measured: {fmt(free.perfect_end)}"
    assert rows["critical batch size (20% overhead)"][3].startswith("measured: ")


def test_spread_over_seeds_shows_only_with_confirmation_trials() -> None:
    import pandas as pd

    from study.report.tables import steps_columns

    single = pd.DataFrame({"batch_size": [8, 32], "steps_to_result": [900, 300], "seeds": [1, 1]})
    assert "spread" not in [c.name for c in steps_columns(single)]
    confirmed = single.assign(seeds=[3, 1], steps_low=[850, 300], steps_high=[1000, 300])
    columns = steps_columns(confirmed)
    names = [c.name for c in columns]
    assert names[1:4] == ["steps_to_result", "spread", "seeds"]
    spread = next(c for c in columns if c.name == "spread")
    assert spread.cell(confirmed.iloc[0].to_dict()) == "850 to 1000"
