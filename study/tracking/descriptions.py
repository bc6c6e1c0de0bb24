"""What a study's MLflow runs say about themselves: the parent's description and trial names.

The parent run's description (the tag ``mlflow.note.content``, markdown, shown at the top of
its page and in the runs table's Description column) states the question at creation
(`question_note`: workload, model, target, batch sizes, strategies, trials planned, the study
file) and ends with an ``### Answer`` section that `with_answer` rewrites: "not yet" until a
run of the study ends, then the model's answer (``study.report.answer_prose.answer_line``)
and where the report is. Everything before that heading is the question; a resumed study
renews the question and keeps the answer (`with_question`).

A trial run's name carries the numbers a user sorts by, so that they show in the runs table's
first column whatever columns it shows (`trial_run_name`), e.g.
``b128/default#3 lr 0.05: 420 steps (reached)`` or
``b128/default#4 lr 0.001: stopped at 1000 steps (not_reached)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from study.results import TrialResult, TrialState

if TYPE_CHECKING:  # pragma: no cover
    from study.config.study import StudyConfig
    from study.ledger import LedgerTrial

#: The MLflow tag holding a run's description.
NOTE = "mlflow.note.content"
#: The heading of the description's answer section (everything above it is the question).
ANSWER_HEADING = "### Answer"
#: The answer section before a run of the study has ended.
NO_ANSWER_YET = "Not yet: no run of this study has ended."


def question_note(config: StudyConfig, *, tuner: str, trials_total: int) -> str:
    """The parent run's description at creation: the question and an empty answer.

    Example: "**Question:** how many steps does `mlp` on `mnist1d` need to reach
    `val_accuracy>=0.6` at each batch size (32, 128), with its best learning rate, and where
    does a larger batch stop paying?" and a list of what the study searches.
    """
    batches = ", ".join(str(b) for b in config.space.batch_sizes)
    model = f"`{config.model}`" if config.model else "the default model"
    subject = f"{model} on `{config.workload}`"
    options = ", ".join(f"{k}={v}" for k, v in sorted(config.workload_options.items()))
    hold = config.target.hold
    lines = [
        f"**Question:** how many steps does {subject} need to reach "
        f"`{config.target}` at each batch size ({batches}), with its best learning rate, and "
        "where does a larger batch stop paying?",
        "",
        f"- workload: `{config.workload}`" + (f" ({options})" if options else ""),
        f"- model: {model}",
        f"- target: `{config.target}`" + (f", held {hold}" if hold.active else ""),
        f"- batch sizes: {batches}",
        f"- strategies: {', '.join(config.space.strategies)}",
        f"- trials planned: {trials_total} (tuner {tuner})",
        f"- study file: `{config.source}` (a copy: `study.yaml` in this run's artifacts)",
    ]
    return "\n".join(lines) + "\n\n" + answer_section(None)


def answer_section(answer: str | None, report: str | None = None) -> str:
    """The ``### Answer`` section: ``answer`` (the terminal's answer line) and where the report
    is (e.g. "`report/report.html` in this run's artifacts"), or `NO_ANSWER_YET`."""
    body = NO_ANSWER_YET if answer is None else answer[:1].upper() + answer[1:]
    lines = [ANSWER_HEADING, "", body]
    if report:
        lines += ["", f"Report: {report}."]
    return "\n".join(lines) + "\n"


def question_of(note: str | None) -> str:
    """The question part of a description: everything before `ANSWER_HEADING` (a note without
    the heading is all question)."""
    text = note or ""
    head, found, _ = text.partition(ANSWER_HEADING)
    return (head if found else text).rstrip() + "\n\n" if text.strip() else ""


def with_answer(note: str | None, answer: str | None, report: str | None = None) -> str:
    """``note`` with its answer section replaced (or added)."""
    return question_of(note) + answer_section(answer, report)


def with_question(note: str | None, question: str) -> str:
    """The new ``question`` (a `question_note`) with the answer section ``note`` holds, if any."""
    _, found, answer = (note or "").partition(ANSWER_HEADING)
    if not found:
        return question
    return question_of(question) + ANSWER_HEADING + answer


def trial_run_name(trial: LedgerTrial, result: TrialResult | None = None) -> str:
    """A trial run's name: its key in the study, learning rate, steps and status.

    Examples: ``b128/default#3 lr 0.05 (running)``, ``b128/default#3 lr 0.05: 420 steps
    (reached)``, ``b32/default#1 lr 0.001: stopped at 900 steps (pruned)``,
    ``b32/default#2 lr 3: failed``.
    """
    name = f"{trial.stratum}#{trial.number}"
    rate = trial.params.get("learning_rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool):
        name += f" lr {rate:.3g}"
    if result is None:
        return f"{name} ({TrialState.RUNNING})"
    state = result.state
    if state is TrialState.REACHED and result.steps_to_target is not None:
        return f"{name}: {result.steps_to_target} steps ({state})"
    if result.steps_run and state is not TrialState.INTERRUPTED:
        return f"{name}: stopped at {result.steps_run} steps ({state})"
    return f"{name}: {state}"
