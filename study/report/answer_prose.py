"""What the model of every trial answers, in the report's words: its sentences, its table rows,
its one terminal line and the notes where it and the best-trial fit disagree.

Every answer is said with its interval: "perfect scaling up to 128-256", "batch 512 (256
within the interval)". The answers themselves are `study.analysis.answers`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from study.analysis.answers import Answer, Answers
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.recommend import Recommendation
from study.analysis.regimes import Regimes
from study.analysis.surrogate import SMOOTH_C_LOW
from study.report.formatting import fmt, percent

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

MODEL = (
    "one model of every trial: log steps over (batch size, learning rate) with S(B) = "
    "S_min (1 + (B_noise/B)^q)^(1/q) at the best rate (q the knee's sharpness, 1 for McCandlish "
    "et al.'s curve), a learning-rate penalty around it and a trial-to-trial noise term; trials "
    "that stopped short count as 'more than N steps'"
)


def batch_range(answer: Answer) -> str:
    """``"128-256"``, ``"256"``, or ``"1024 or beyond the measured sizes"``."""
    if math.isinf(answer.high):
        return f"{fmt(answer.low)} or beyond the measured sizes"
    return fmt(answer.low) if answer.low == answer.high else f"{fmt(answer.low)}-{fmt(answer.high)}"


def interval(answer: Answer) -> str:
    """``"734 (454-1339)"``."""
    return f"{fmt(answer.estimate)} ({fmt(answer.low)}-{fmt(answer.high)})"


def recommendation_text(answer: Answer) -> str:
    """``"batch 512 (256 within the interval)"``; ``"batch 512"`` when the interval is it alone."""
    others = [fmt(b) for b in (answer.low, answer.high) if b != answer.estimate]
    if not others:
        return f"batch {fmt(answer.estimate)}"
    return (
        f"batch {fmt(answer.estimate)} ({' and '.join(dict.fromkeys(others))} within the interval)"
    )


def answer_sentences(answers: Answers) -> list[str]:
    """The model's answers as sentences, each with its interval."""
    if not answers.ok:
        return [f"The model of every trial has no answer: {answers.reason}."]
    model, level = answers.surrogate, percent(answers.confidence)
    out = [
        f"Read from {model.trials} trials ({model.censored} stopped short), with "
        f"{level} intervals that include the trial-to-trial noise (sigma = "
        f"{fmt(answers.sigma.estimate)} in log steps): B_noise = {interval(answers.b_noise)}, "
        f"S_min = {interval(answers.s_min)} steps, the critical batch size at "
        f"{answers.overhead:.0%} overhead {interval(answers.critical_batch)}."
    ]
    text = f"Perfect scaling up to {batch_range(answers.perfect_end)}"
    start = answers.max_parallel_start
    if math.isinf(start.low):
        text += "; maximal data parallelism does not start within the measured batch sizes"
    else:
        text += f"; maximal data parallelism from {batch_range(start)}"
    out.append(text + ".")
    shape = "a power law" if model.shape == "power law" else "a curve that bends"
    out.append(
        f"The best learning rate follows {shape}, alpha = {interval(answers.alpha)} over the "
        "measured batch sizes."
    )
    if answers.recommended_batch is not None:
        out.append(
            f"For {answers.accelerators} accelerators: "
            f"{recommendation_text(answers.recommended_batch)} at learning rate "
            f"{interval(answers.recommended_lr)}, {interval(answers.step_speedup)} times fewer "
            "steps than the smallest batch size."
        )
    return out


def answer_line(answers: Answers) -> str:
    """One line for a terminal, a status and an MLflow description."""
    if not answers.ok:
        return f"no answer from the model of every trial: {answers.reason}"
    line = (
        f"B_noise {interval(answers.b_noise)}, perfect scaling up to "
        f"{batch_range(answers.perfect_end)}"
    )
    if answers.recommended_batch is not None:
        line += (
            f"; {answers.accelerators} accelerators: "
            f"{recommendation_text(answers.recommended_batch)}"
        )
    return line + f" ({percent(answers.confidence)} intervals, {answers.surrogate.trials} trials)"


def answer_rows(answers: Answers) -> list[tuple[str, str, str, str]]:
    """The rows of the report's answers table: quantity, estimate, interval, comment."""
    if not answers.ok:
        return [("model of every trial", "not fitted", "", answers.reason)]
    rows = []
    for answer in answers.items():
        if answer.batch:
            rows.append((answer.name, fmt(answer.estimate), batch_range(answer), ""))
        else:
            rows.append((answer.name, fmt(answer.estimate), f"{fmt(answer.low)} to "
                         f"{fmt(answer.high)}", ""))  # fmt: skip
    model = answers.surrogate
    rows.append(
        (
            "best learning rate's shape",
            model.shape,
            "",
            f"likelihood-ratio p = {fmt(model.bend_p_value)} for the bend",
        )
    )
    rows.append(
        (
            "learning-rate response's bottom",
            model.bottom,
            "",
            f"curvature {fmt(math.exp(model.value('log_c_low')))} below the best rate; "
            f"likelihood-ratio p = {fmt(model.sharp_p_value)} for one sharper than "
            f"{fmt(SMOOTH_C_LOW)}",
        )
    )
    rows.append(
        (
            "S(B)'s knee sharpness q",
            fmt(model.knee),
            "",
            "1: McCandlish et al.'s curve; larger: perfect scaling longer, then a sharper turn",
        )
    )
    rows.append(
        (
            "S(B) against free steps per batch size",
            "misfits" if model.misfits else "fits",
            "",
            f"likelihood-ratio p = {fmt(model.misfit_p_value)}",
        )
    )
    return rows


def cross_check_notes(
    answers: Answers, fit: NoiseScaleFit, regimes: Regimes, recommendation: Recommendation
) -> list[str]:
    """Where the model of every trial and the best-trial-per-batch-size fit disagree, and
    whether S(B) misfits."""
    if not answers.ok:
        return []
    out = []
    if answers.surrogate.misfits:
        out.append(
            "S(B) = S_min (1 + (B_noise/B)^q)^(1/q) misfits the trials: steps per batch size left "
            "free fit "
            f"them better (likelihood-ratio p = {fmt(answers.surrogate.misfit_p_value)}); read "
            "the answers with care and look at the steps-to-result figure."
        )
    if fit.ok and fit.b_noise_ci is not None:
        low, high = fit.b_noise_ci
        if not (answers.b_noise.low <= fit.b_noise <= answers.b_noise.high) and not (
            low <= answers.b_noise.estimate <= high
        ):
            out.append(
                f"The best trial per batch size gives B_noise = {fmt(fit.b_noise)} "
                f"({fmt(low)} to {fmt(high)}), outside the model's {interval(answers.b_noise)}: "
                "one lucky or unlucky trial per batch size moves that fit; the model reads "
                "every trial."
            )
    if regimes.ok and not answers.perfect_end.covers(float(regimes.perfect_end)):
        out.append(
            f"Perfect scaling ends at {fmt(regimes.perfect_end)} by the best trials, outside "
            f"the model's {batch_range(answers.perfect_end)}."
        )
    rec = answers.recommended_batch
    if rec is not None and recommendation.ok and not rec.covers(float(recommendation.batch_size)):
        out.append(
            f"The best trials recommend batch {fmt(recommendation.batch_size)} for "
            f"{answers.accelerators} accelerators, outside the model's "
            f"{batch_range(rec)}."
        )
    return out


def report_answer_sentences(report: ScalingReport) -> list[str]:
    """`answer_sentences` of the report's answers (none when it has none)."""
    return [] if report.answers is None else answer_sentences(report.answers)
