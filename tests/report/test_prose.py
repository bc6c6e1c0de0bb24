"""The report's answer, its terminal summary and how it was made (`study.report.prose`)."""

from __future__ import annotations

import dataclasses

from study.analysis.covariance import Component
from study.report import answer, summary_lines
from study.report.prose import how_it_was_made, method_text


def test_the_answer_states_the_question_and_the_fitted_numbers(report) -> None:
    text = answer(report)

    assert text.startswith(
        "How many training steps does it take to reach val_accuracy>=0.6 as the global batch "
        "size grows, and which batch size should 8 accelerators use?"
    )
    answers = report.answers
    assert f"B_noise = {answers.b_noise.text()}" in text and "95% intervals" in text
    assert f"the critical batch size at 20% overhead is {answers.critical_batch.text()}" in text
    assert "consistent with the square-root rule (alpha = 0.5)" in text
    assert f"For 8 accelerators, use batch {report.recommendation.batch_size}" in text
    # The cross-check is said in its own section, not in the answer.
    assert "best trial" not in text
    assert "90%" not in text


def test_a_lower_confidence_is_said_in_the_answer_and_summary(make_report, table) -> None:
    report = make_report(table, confidence=0.9)

    text = answer(report)
    assert "95%" not in text
    assert "90% intervals" in summary_lines(report)[2] and "90% intervals" in text


def test_summary_lines_for_a_terminal(report) -> None:
    lines = summary_lines(report)

    assert 3 <= len(lines) <= 6
    assert lines[0] == "synthetic: target val_accuracy>=0.6, 8 batch size(s), 48 trials (complete)"
    assert lines[1].startswith("steps to result: b8=") and ", b1024=" in lines[1]
    assert lines[2].startswith("answer: B_noise ") and "perfect scaling up to " in lines[2]
    assert "(95% intervals, 48 trials)" in lines[2]
    assert f"B_noise {report.answers.b_noise.text()}" in lines[2]
    assert lines[3].startswith(f"8 accelerators: batch {report.recommendation.batch_size}, lr ")
    assert not any(line.startswith("B_noise = ") for line in lines)  # stated once


def test_how_it_was_made(make_report, table) -> None:
    report = make_report(table.iloc[:0], context={"storage": "x.journal"})

    rows = dict(how_it_was_made(report))

    assert rows["command"] == "study report synthetic --target 'val_accuracy>=0.6'"
    assert rows["intervals"] == "95%, from the model's parameter draws"
    assert rows["trials"] == "0" and rows["storage"] == "x.journal"


def test_the_method_names_the_knee_readings_its_draws_mix_in(report) -> None:
    model = report.answers.surrogate

    def with_readings(held: Component | None, sharp: Component | None) -> str:
        surrogate = dataclasses.replace(model, knee_held=held, knee_sharp=sharp)
        answers = dataclasses.replace(report.answers, surrogate=surrogate)
        return method_text(dataclasses.replace(report, answers=answers))

    both = with_readings(
        Component(0.125, model.theta, model.covariance),
        Component(0.25, model.theta, model.covariance),
    )
    assert (
        "the knee held at q = 1 (12.5% of the draws) and at q = 8 (25.0% of the draws), "
        "each weighed by its likelihood" in both
    )
    soft = with_readings(Component(1e-10, model.theta, model.covariance), None)
    assert "q = 1 (under 0.1% of the draws)" in soft and "q = 8" not in soft
    assert "knee held" not in with_readings(None, None)
