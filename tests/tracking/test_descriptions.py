"""What a study's MLflow runs say about themselves: the parent's question and answer, and trial
run names that carry learning rate, steps and status."""

from __future__ import annotations

import copy

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import LedgerTrial
from study.results import TrialResult, TrialState
from study.tracking.descriptions import (
    ANSWER_HEADING,
    NO_ANSWER_YET,
    question_note,
    question_of,
    trial_run_name,
    with_answer,
    with_question,
)
from tests.config.test_studyfile import BASE


def question(**changes: object) -> str:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return question_note(parse_study(data, "studies/x.yaml"), tuner="both", trials_total=4)


def test_the_question_names_what_the_study_searches_and_has_no_answer_yet() -> None:
    note = question()

    assert note.startswith(
        "**Question:** how many steps does `mlp` on `mnist1d` need to reach `val_accuracy>=0.6` "
        "at each batch size (8, 32), with its best learning rate, and where does a larger batch "
        "stop paying?\n"
    )
    for line in (
        "- workload: `mnist1d` (samples=1000)",
        "- model: `mlp`",
        "- target: `val_accuracy>=0.6`, held through the next 5% of steps, at least 5",
        "- batch sizes: 8, 32",
        "- strategies: default",
        "- trials planned: 4 (tuner both)",
        "- study file: `studies/x.yaml` (a copy: `study.yaml` in this run's artifacts)",
    ):
        assert f"\n{line}\n" in note
    assert note.endswith(f"\n\n{ANSWER_HEADING}\n\n{NO_ANSWER_YET}\n")
    plain = question(target_hold="off", workload_options={}, model=None)
    assert "- target: `val_accuracy>=0.6`\n" in plain and "- workload: `mnist1d`\n" in plain
    assert "does the default model on `mnist1d` need" in plain
    assert "- model: the default model\n" in plain


def test_the_answer_replaces_the_answer_section_only() -> None:
    note = question()
    answered = with_answer(note, "B_noise 734 (454-1339)", "`report/report.html` in Artifacts")

    assert question_of(answered) == question_of(note)
    assert answered.endswith(
        f"{ANSWER_HEADING}\n\nB_noise 734 (454-1339)\n\nReport: `report/report.html` in Artifacts.\n"
    )
    again = with_answer(answered, "B_noise 700 (400-1200)")
    assert again.count(ANSWER_HEADING) == 1 and "734" not in again and "Report:" not in again
    assert with_answer("a note someone wrote", "42") == (
        f"a note someone wrote\n\n{ANSWER_HEADING}\n\n42\n"
    )
    assert with_answer(None, None) == f"{ANSWER_HEADING}\n\n{NO_ANSWER_YET}\n"
    assert with_answer(None, "no answer: too few sizes").endswith("\n\nNo answer: too few sizes\n")


def test_a_resumed_study_renews_the_question_and_keeps_the_answer() -> None:
    answered = with_answer(question(), "B_noise 734 (454-1339)")
    renewed = with_question(answered, question(trials_per_stratum=5))

    assert "- trials planned: 4 (tuner both)" in renewed  # the count given to question_note
    assert "stop paying?" in renewed
    assert renewed.endswith(f"{ANSWER_HEADING}\n\nB_noise 734 (454-1339)\n")
    assert with_question(None, question()) == question()
    assert with_question(answered, question()) == answered


def trial(number: int = 3, rate: float = 0.05) -> LedgerTrial:
    return LedgerTrial(
        stratum=Stratum(128, "default"),
        number=number,
        status=TrialState.RUNNING,
        params={"learning_rate": rate},
    )


def test_trial_run_names_carry_the_numbers_a_user_sorts_by() -> None:
    assert trial_run_name(trial()) == "b128/default#3 lr 0.05 (running)"
    reached = TrialResult(TrialState.REACHED, steps_run=430, steps_to_target=420)
    assert trial_run_name(trial(), reached) == "b128/default#3 lr 0.05: 420 steps (reached)"
    pruned = TrialResult(TrialState.PRUNED, steps_run=900)
    assert trial_run_name(trial(1, 0.00123456), pruned) == (
        "b128/default#1 lr 0.00123: stopped at 900 steps (pruned)"
    )
    assert trial_run_name(trial(2, 3.0), TrialResult(TrialState.FAILED)) == (
        "b128/default#2 lr 3: failed"
    )
    interrupted = TrialResult(TrialState.INTERRUPTED, steps_run=50)
    assert trial_run_name(trial(), interrupted) == "b128/default#3 lr 0.05: interrupted"
    unknown = LedgerTrial(stratum=Stratum(64, "mirrored:2"), number=0, status=TrialState.RUNNING)
    assert trial_run_name(unknown) == "b64/mirrored:2#0 (running)"
