"""The predicted-noise section's sentences: the B_simple measured during training, where it
came from, and whether it agrees with the fitted B_noise (with McCandlish et al.'s caveat); or
how to get a prediction.

The HTML, Markdown and JSON writers and the tables call `noise_sentences` and `predicted_source`;
the answer (`study.report.prose`) borrows `agreement_sentence`.

Example::

    noise_sentences(report)[0]  # "The gradient noise scale measured during training predicts ..."
    ratio_text(2.5)  # "B_noise is 2.5 times B_simple"
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from study.analysis.predicted_noise import ORDER_OF_MAGNITUDE, PILOT, PredictedNoise
from study.analysis.table import BATCH_SIZE, STRATEGY
from study.report.answer_prose import answer_span
from study.report.formatting import ci_text, fmt, percent

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

NOISE_HOW_TO = (
    "No predicted B_simple: the study has no pilot run and no trial measured the gradient "
    "noise scale. Run `study noise-scale STUDY_FILE --study NAME` (a short pilot run at a "
    "small batch size, stored with the study) or set `noise_scale: true` in the study file so that its trials measure "
    "it; the next report then shows it next to the fitted B_noise."
)
"""What the predicted-noise section says when there is no prediction."""

NOISE_CAVEAT = (
    "B_simple equals B_noise only when the Hessian is a multiple of the identity (McCandlish "
    "et al. 2018); in general they found the critical batch size to track B_simple within an "
    "order of magnitude, so B_simple predicts where to look, and the fit says where it is."
)
"""McCandlish et al.'s caveat, said with every comparison."""


def predicted_source(predicted: PredictedNoise) -> str:
    """Where a predicted B_simple came from, e.g. ``"the pilot run (batch size 32 on default,
    at step 400 of 400)"`` or ``"the trials: the median over the best trials of 5 batch sizes,
    ..."``."""
    if not predicted.ok:
        return ""
    if predicted.source == PILOT:
        row = predicted.estimates.iloc[0]
        where = []
        if row[BATCH_SIZE] is not None:
            where.append(f"batch size {fmt(row[BATCH_SIZE])}")
        if row[STRATEGY]:
            where[-1:] = [f"{where[-1]} on {row[STRATEGY]}"] if where else [str(row[STRATEGY])]
        step = row["step"]
        if step is not None and not pd.isna(step):
            of = f" of {predicted.steps_run}" if predicted.steps_run else ""
            where.append(f"at step {fmt(step)}{of}")
        return "the pilot run" + (f" ({', '.join(where)})" if where else "")
    n = predicted.batch_sizes
    if n == 1:
        row = predicted.estimates.iloc[0]
        return (
            f"the trials: the best trial at batch size {fmt(row[BATCH_SIZE])}, at "
            f"{'the evaluation where it first met the target' if row['at_target'] else 'its last evaluation'}"
        )
    return (
        f"the trials: the median over the best trials of {n} batch sizes, each at the "
        "evaluation where it first met the target (or its last); the interval runs from the "
        "lowest to the highest of their intervals"
    )


def noise_sentences(report: ScalingReport) -> list[str]:
    """The predicted-noise section: the prediction, the fit, whether they agree (the
    second-to-last sentence, also used in the summary) and McCandlish et al.'s caveat; or
    how to get a prediction."""
    predicted, fit, agreement = report.predicted_noise, report.noise_scale, report.noise_agreement
    if not predicted.ok:
        return [NOISE_HOW_TO]
    interval = (
        f" (interval {fmt(predicted.interval[0])} to {fmt(predicted.interval[1])})"
        if predicted.interval
        else ""
    )
    out = [
        f"The gradient noise scale measured during training predicts B_simple = "
        f"{fmt(predicted.b_simple)}{interval}, from {predicted_source(predicted)}."
    ]
    if not agreement.ok:
        out.append(f"There is no model B_noise to compare it with: {fit.reason}.")
        out.append(NOISE_CAVEAT)
        return out
    return [*out, agreement_sentence(report), NOISE_CAVEAT]


def ratio_text(ratio: float) -> str:
    """``"B_noise is 2.5 times B_simple"``, or the other way round when B_simple is larger."""
    if ratio >= 1:
        return f"B_noise is {fmt(ratio)} times B_simple"
    return f"B_simple is {fmt(1 / ratio)} times B_noise"


def agreement_word(report: ScalingReport) -> str:
    """``agrees``, ``agrees loosely`` (only because B_simple's interval has no upper end and
    B_noise lies above it) or ``does not agree``."""
    predicted, agreement = report.predicted_noise, report.noise_agreement
    if not agreement.agree:
        return "does not agree"
    unbounded = predicted.interval is not None and math.isinf(predicted.interval[1])
    return "agrees loosely" if unbounded and agreement.ratio > 1 else "agrees"


def agreement_sentence(report: ScalingReport) -> str:
    """Whether the predicted B_simple and the fitted B_noise agree (intervals overlap), by
    what factor they differ, and whether that is within an order of magnitude ("" when one of
    them is missing)."""
    predicted, fit, agreement = report.predicted_noise, report.noise_scale, report.noise_agreement
    if not agreement.ok:
        return ""
    both = (
        f"The predicted B_simple = {fmt(predicted.b_simple)} (from "
        f"{'the pilot run' if predicted.source == PILOT else 'the trials'}) and the "
        f"model's B_noise = {fmt(fit.b_noise)}{_model_ci(report)}"
    )
    times = ratio_text(agreement.ratio)
    if agreement_word(report) == "agrees loosely":
        verdict = (
            f"{both} agree only loosely: their intervals overlap because B_simple's has no "
            f"upper end (the estimate is still noisy; a longer run narrows it), and {times}."
        )
    elif agreement.agree:
        verdict = f"{both} agree: their intervals overlap ({times})."
    else:
        verdict = (
            f"{both} do not agree: their intervals do not overlap; {times}, and the nearest "
            f"ends of the intervals lie a factor of {fmt(agreement.gap)} apart."
        )
    order = (
        f" That is within the order of magnitude ({ORDER_OF_MAGNITUDE:g}x) McCandlish et al. "
        "found between B_simple and the critical batch size."
        if agreement.within_order
        else f" That is more than the order of magnitude ({ORDER_OF_MAGNITUDE:g}x) McCandlish "
        "et al. found between B_simple and the critical batch size: check the pilot's batch "
        "size and length, and the fit's notes."
    )
    return verdict + order


def _model_ci(report: ScalingReport) -> str:
    """The model's B_noise interval for a sentence (an open end in words)."""
    fit, answers = report.noise_scale, report.answers
    if answers is not None and answers.ok:
        return f" ({percent(fit.confidence)} CI {answer_span(answers.b_noise)})"
    return ci_text(fit.b_noise_ci, fit.confidence)
