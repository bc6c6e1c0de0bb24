"""The cross-check in the report's words: the best trial of each batch size read without the
model of every trial, said once, in its own section, with one line per disagreement.

The answer is the model's (`study.report.answer_prose`); these sentences only say what the best
trials alone, and the measured steps read without any model, give beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from study.report.formatting import ci_text, fmt

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

INTRO = (
    "A diagnostic, not the answer: the best trial of each batch size read alone, without the "
    "model of every trial. One lucky or unlucky trial moves these readings; the model reads "
    "every trial, the ones that stopped short included."
)


def cross_check_sentences(report: ScalingReport) -> list[str]:
    """The cross-check's sentences: what the best trials give, and where they disagree."""
    check = report.cross_check
    out = [INTRO]
    fit = check.noise_scale
    if fit.ok:
        out.append(
            f"McCandlish et al.'s S(B) = S_min (1 + B_noise/B) fitted to the best trials gives "
            f"B_noise = {fmt(fit.b_noise)}{ci_text(fit.b_noise_ci, fit.confidence)} and S_min = "
            f"{fmt(fit.s_min)}{ci_text(fit.s_min_ci, fit.confidence)} steps."
        )
    else:
        out.append(f"The best trials give no S(B) fit: {fit.reason}.")
    free = check.model_free
    if free is not None:
        out.append(f"Read from the measured steps without a model: {free.text()}.")
    regimes = check.regimes
    if regimes.ok:
        start = regimes.max_parallel_start
        flat = (
            "does not start within the measured batch sizes"
            if start is None
            else f"starts at {fmt(start)}"
        )
        out.append(
            f"By the best trials' measured steps, perfect scaling ends at "
            f"{fmt(regimes.perfect_end)} and maximal data parallelism {flat}."
        )
    rec = check.recommendation
    if rec.ok:
        out.append(
            f"Those fits would give {rec.accelerators} accelerators batch {fmt(rec.batch_size)} "
            f"at the measured best rate {fmt(rec.learning_rate)}."
        )
    if check.disagreements:
        out += list(check.disagreements)
    elif report.answers.ok:
        out.append("Every reading here agrees with the model's answer within its interval.")
    return out
