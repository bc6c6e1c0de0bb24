"""The report's notes on thin data (`study.report.notes`), as `build_report` keeps them in
``ScalingReport.notes``, and the notes functions on their own."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from study.config.hold import Hold
from study.config.target import Target
from study.report import answer
from study.report.build import build_report
from study.report.json import render_json
from study.report.notes import edge_notes, thin_notes
from tests.analysis.conftest import build_table
from tests.analysis.test_seeds import ACC_60, seeded_table
from tests.report.conftest import TARGET


def test_clean_data_has_no_thin_data_notes(report) -> None:
    text = " ".join(report.notes)
    for phrase in ("never reached", "Only", "still running", "edge", "never measured"):
        assert phrase not in text


def test_two_batch_sizes_give_no_fit_and_say_why(make_report, make_table) -> None:
    report = make_report(make_table(batch_sizes=(32, 64)))
    assert not report.answers.ok and not report.noise_scale.ok and not report.recommendation.ok
    (note,) = [n for n in report.notes if n.startswith("The model of every trial has no answer")]
    assert "fewer than 3 batch sizes reached the target (2)" in note
    assert "at least 13 trials, 6 of them reaching the target, over at least 3 batch" in note
    assert "trials_per_stratum" in note  # what would let it answer
    assert "No answer yet: fewer than 3 batch sizes reached the target (2)" in answer(report)


def test_a_batch_size_that_never_reached_is_named(make_report, make_table) -> None:
    df = make_table()
    df.loc[df["batch_size"] == 1024, "val_accuracy"] = 0.2
    report = make_report(df)
    assert math.isinf(report.steps.set_index("batch_size").loc[1024, "steps_to_result"])
    assert report.steps.set_index("batch_size").loc[1024, "regime"] == "not reached"
    assert any(n.startswith("Batch size 1024 (6 trials) never reached") for n in report.notes)
    assert report.noise_scale.ok and 1024 not in report.noise_scale.batch_sizes
    # The model reads its trials as 'more than N steps', and no answer is read there.
    low, high = report.noise_scale.b_noise_ci
    assert 128 / 3 < low < high < 3 * 128
    assert "(7 of 8 batch sizes reached the target)" in answer(report)


def test_a_running_or_incomplete_study_is_flagged(make_report, make_table) -> None:
    df = make_table()
    df.loc[df["trial"] == 0, "state"] = "running"
    report = make_report(df, state="running")
    assert any("still running (1 trial(s) in progress)" in n for n in report.notes)
    incomplete = make_report(make_table(), state="incomplete")
    assert any("`study resume synthetic` runs the rest" in n for n in incomplete.notes)


def test_best_learning_rate_on_the_range_edge_is_named(make_report, make_table) -> None:
    # Only rates at and below the best: the best sits on the high edge everywhere.
    report = make_report(make_table(lr_factors=(1 / 9, 1 / 3, 1.0)))
    (note,) = [n for n in report.notes if "high edge" in n]
    assert "batch sizes 8, 16, 32, 64, 128, 256, 512 and 1024" in note
    assert "widen the learning-rate range upwards" in note


def test_a_best_rate_at_the_highest_rate_tried_inside_the_range_is_not_an_edge(
    make_report, make_table
) -> None:
    from study.config.studyfile import load_study_file
    from study.report.record import StudyFacts

    config = load_study_file("search_spaces/quickstart.yaml")  # rates 0.01 to 1.0
    table = make_table(lr_factors=(1 / 9, 1 / 3, 1.0))  # best: the highest rate tried
    searched = make_report(table, facts=StudyFacts(config=config))

    (note,) = [n for n in searched.notes if "highest rate tried" in n]
    assert "inside the searched range (0.01 to 1)" in note
    assert not any("widen the learning-rate range" in n for n in searched.notes)


def test_a_missing_target_metric_is_said_not_raised(make_report, table) -> None:
    report = make_report(table, Target.parse("val/f1>=0.5"))
    assert report.trials.empty and report.steps.empty
    assert not report.noise_scale.ok and not report.recommendation.ok
    (note,) = [n for n in report.notes if "never measured" in n]
    assert "val/f1" in note and "(the measurements have: val_accuracy, val_loss)" in note


def test_nothing_reached(make_report, table) -> None:
    report = make_report(table, Target.parse("val_accuracy>=0.99"))
    assert not np.isfinite(report.steps["steps_to_result"]).any()
    assert "No batch size reached the target" in answer(report)
    assert any("never reached" in n for n in report.notes)


@pytest.mark.parametrize(("confidence", "level"), [(0.95, "95%"), (0.9, "90%")])
def test_an_unbounded_noise_scale_is_said_at_its_confidence(
    make_report, make_table, confidence, level
) -> None:
    # Perfect scaling over the whole measured range: B_noise is not bounded from above.
    report = make_report(
        make_table(b_noise=1e6, batch_sizes=(8, 16, 32, 64)), confidence=confidence
    )
    assert report.noise_scale.ok
    (note,) = [n for n in report.notes if "do not bound B_noise from above" in n]
    b_noise = report.answers.b_noise
    assert not b_noise.open_low
    if b_noise.open_high:  # its draws reach the end of the search range: printed open
        assert note.startswith(f"The {level} interval of B_noise has no upper end ")
        assert "1,000 x the largest batch size (64)" in note
        assert b_noise.range_text() == f"at least {b_noise.low:.3g}"
    else:
        assert note.startswith(f"The {level} interval of B_noise reaches ")
        assert "over 10 x the largest batch size (64)" in note
    assert b_noise.open_high == (confidence == 0.95)


def test_each_kind_of_note_on_its_own() -> None:
    steps = pd.DataFrame(
        {
            "batch_size": [8, 16, 32],
            "steps_to_result": [100.0, 60.0, math.inf],
            "trials": [6, 1, 6],
            "diverged": [0, 0, 2],
            "lr_edge": ["", "low", "low"],
        }
    )

    (never,) = thin_notes(steps, Target.parse("val_accuracy>=0.9"))
    assert never.startswith("Batch size 32 (6 trials, 2 diverged) never reached the target")
    (edge,) = edge_notes(steps)
    assert "low edge of the searched range at batch sizes 16 and 32" in edge


def test_crossings_that_fell_back_and_the_rule_are_said(make_report, make_table) -> None:
    df = make_table()
    rule = Hold(0.05, 1)
    # Every trial of batch size 64 meets the target at one evaluation and misses it at the next.
    trial = df.loc[df["batch_size"] == 64, "trial"].min()
    rows = df.index[(df["batch_size"] == 64) & (df["trial"] == trial)]
    crossing = df.loc[rows, "val_accuracy"].to_numpy() >= TARGET.threshold
    first = int(np.argmax(crossing))
    assert crossing[first] and first + 1 < len(rows)
    df.loc[rows[first + 1], "val_accuracy"] = 0.0
    with_rule = make_report(df, replace(TARGET, hold=rule))
    (note,) = [n for n in with_rule.notes if "fell back" in n]
    assert note.startswith(f"1 of {len(with_rule.trials)} trials met the target")
    assert "batch size 64" in note and "does not depend on the evaluation cadence" in note
    without = make_report(df, TARGET)  # Hold.OFF: the first evaluation counts, and it says so
    assert any(
        n.startswith("Steps to result are read at the first evaluation") for n in without.notes
    )
    assert not any("fell back" in n for n in without.notes)


def test_the_report_says_the_seed_noise_or_that_it_was_not_measured() -> None:
    confirmed = build_report(
        seeded_table(build_table, confirmed=True), ACC_60, study="s", accelerators=None
    )
    noise = confirmed.seed_noise
    # each point: the study's seed and seeds 1, 2 (steady 1.0, 1.05, 0.97; lucky 0.7, 1.3, 1.4)
    assert noise.ok and (noise.points, noise.trials) == (10, 30)
    assert any(n.startswith("Seed noise: at one point") for n in confirmed.notes)
    assert json.loads(render_json(confirmed))["seed_noise"]["points"] == 10
    plain = build_report(
        seeded_table(build_table, confirmed=False), ACC_60, study="s", accelerators=None
    )
    assert not plain.seed_noise.ok
    assert any(n.startswith("No point was reached under two or more") for n in plain.notes)


def test_a_best_rate_the_model_puts_far_past_the_rates_tried_is_named(make_report, make_table):
    from study.report.notes import extrapolation_notes

    report = make_report(make_table())
    steps = report.steps
    assert extrapolation_notes(report.answers, steps) == []  # rates tried around the optimum

    narrow = steps.assign(lr_max=steps["lr_max"] / 100.0, lr_min=steps["lr_min"] / 100.0)
    (note,) = extrapolation_notes(report.answers, narrow)
    assert note.startswith("The model's best learning rate reaches its cap, 2 times the highest")
    assert "batch size(s) 8 (" in note and "run trials at higher rates there" in note
    wide = steps.assign(lr_max=steps["lr_max"] * 100.0, lr_min=steps["lr_min"] * 100.0)
    (note,) = extrapolation_notes(report.answers, wide)
    assert note.startswith("The model's best learning rate lies far below the lowest rate")


def test_a_knee_the_trials_do_not_pin_is_said_with_what_would_pin_it(report) -> None:
    from study.analysis.covariance import Component
    from study.analysis.parameters import Param
    from study.report.notes import knee_notes

    model = report.answers.surrogate
    theta = model.theta.copy()
    theta[Param.LOG_B_NOISE] = math.log(500.0)

    def notes(held: float | None, sharp: float | None) -> list[str]:
        readings = [None if w is None else Component(w, theta, model.covariance)
                    for w in (held, sharp)]  # fmt: skip
        surrogate = replace(model, knee_held=readings[0], knee_sharp=readings[1])
        return knee_notes(replace(report.answers, surrogate=surrogate))

    # The q = 1 reading at 0.3 of the draws beside the fit's 0.7: its likelihood is
    # 0.3 / 0.7 * e of the fit's, well within the 95% bound (0.147).
    (note,) = notes(0.3, None)
    assert note.startswith("The trials do not pin the knee's sharpness: the fit reads q = ")
    assert "held at q = 1 (B_noise 500) fits them within the likelihood's 95% bound" in note
    assert "would pin it." in note
    (both,) = notes(0.3, 0.3)
    assert "q = 1 (B_noise 500) or at q = 8 (B_noise 500)" in both
    assert notes(0.01, 0.05) == []  # 0.01 / 0.94 * e and 0.05 / 0.94: outside the bound
    assert notes(None, None) == []
