"""What the model of every trial answers, in the report's words: its sentences, its table rows,
its one terminal line, the note when S(B) misfits, and the notes where the best trial of each
batch size (the cross-check) disagrees with it.

Every answer is said with its interval: "perfect scaling up to 128-256", "batch 512 (256
within the interval)". The answers themselves are `study.analysis.answers`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from study.analysis.answers import ANSWER_NAMES, Answer, Answers
from study.analysis.fitting import MIN_BATCH_SIZES, open_range_words
from study.analysis.likelihood import MIN_REACHED, MIN_TRIALS
from study.analysis.model_free import ModelFree
from study.analysis.surrogate import SMOOTH_C_LOW
from study.report.formatting import fmt, percent

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import CrossCheck

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
    """``"734 (454-1339)"``; an open end in words: ``"734 (at least 454)"``."""
    words = open_range_words(answer.low, answer.high, fmt, answer.open_low, answer.open_high)
    return f"{fmt(answer.estimate)} ({words or f'{fmt(answer.low)}-{fmt(answer.high)}'})"


def answer_span(answer: Answer) -> str:
    """A continuous answer's interval as the tables write it: ``"55.8 to 1980"``; an open end
    in words: ``"at least 55.8"``."""
    words = open_range_words(answer.low, answer.high, fmt, answer.open_low, answer.open_high)
    return words or f"{fmt(answer.low)} to {fmt(answer.high)}"


def recommendation_text(answer: Answer) -> str:
    """``"batch 512 (256 within the interval)"``; ``"batch 512"`` when the interval is it alone."""
    others = [fmt(b) for b in (answer.low, answer.high) if b != answer.estimate]
    if not others:
        return f"batch {fmt(answer.estimate)}"
    return (
        f"batch {fmt(answer.estimate)} ({' and '.join(dict.fromkeys(others))} within the interval)"
    )


def answer_sentences(answers: Answers, *, recommendation: bool = True) -> list[str]:
    """The model's answers as sentences, each with its interval, and the rules they read (the
    batch size for N accelerators too, unless ``recommendation`` is False)."""
    if not answers.ok:
        return [no_answer_sentence(answers)]
    model, level = answers.surrogate, percent(answers.confidence)
    out = [
        f"Read from {model.trials} trials ({model.censored} stopped short), with "
        f"{level} intervals that include the trial-to-trial noise (sigma = "
        f"{fmt(answers.sigma.estimate)} in log steps): B_noise = {interval(answers.b_noise)}, "
        f"S_min = {interval(answers.s_min)} steps, E_min = {interval(answers.e_min)} examples."
    ]
    text = f"Perfect scaling up to {answers.perfect_end.text()}"
    start = answers.max_parallel_start
    if math.isinf(start.low):
        text += "; maximal data parallelism does not start within the measured batch sizes"
    elif math.isinf(start.estimate):
        text += f"; maximal data parallelism from {batch_range(start)}"
    else:
        text += f"; maximal data parallelism from {start.text()}"
    out.append(
        f"{text}; the critical batch size at {answers.overhead:.0%} overhead is "
        f"{interval(answers.critical_batch)}."
    )
    out.append(rules_sentence(answers))
    shape = "a power law" if model.shape == "power law" else "a curve that bends"
    out.append(
        f"The best learning rate follows {shape}, alpha = {interval(answers.alpha)} over the "
        f"measured batch sizes, {alpha_rule(answers.alpha)}."
    )
    if recommendation and answers.recommended_batch is not None:
        out.append(
            f"For {answers.accelerators} accelerators: "
            f"{recommendation_text(answers.recommended_batch)} at learning rate "
            f"{interval(answers.recommended_lr)}, {speedup_text(answers)}."
        )
    return out


def alpha_rule(alpha: Answer) -> str:
    """Which scaling rule of the learning rate alpha's interval is consistent with."""
    linear, root = alpha.covers(1.0), alpha.covers(0.5)
    if linear and root:
        return "too uncertain to tell the linear from the square-root rule"
    if linear:
        return "consistent with the linear scaling rule (alpha = 1)"
    if root:
        return "consistent with the square-root rule (alpha = 0.5)"
    return "consistent with neither the linear nor the square-root rule"


def rules_sentence(answers: Answers) -> str:
    """How the end of perfect scaling and the critical batch size are read, so that the two do
    not read as a contradiction."""
    return (
        f"Perfect scaling reads each step between measured batch sizes (steps fall to at most "
        f"{1 + answers.tolerance:.0%} of the ideal per step); the critical batch size is where "
        f"steps run {answers.overhead:.0%} above perfect scaling as a whole, so perfect scaling "
        "can end past it."
    )


def speedup_text(answers: Answers) -> str:
    """``"14.6 (6.98-16) times fewer steps than batch 8"``; ``"the smallest batch size
    itself"`` when the recommendation is it."""
    speed, model = answers.step_speedup, answers.surrogate
    smallest = model.reached_batch_sizes[0]
    if answers.recommended_batch.estimate == smallest:
        return f"the smallest batch size that reached the target ({fmt(smallest)}) itself"
    return f"{interval(speed)} times fewer steps than batch {fmt(smallest)}"


def no_answer_sentence(answers: Answers) -> str:
    """Why the model has no answer, and what would let it answer."""
    return (
        f"No answer yet: {answers.reason}. The model of every trial needs at least "
        f"{MIN_TRIALS} trials, {MIN_REACHED} of them reaching the target, over at least "
        f"{MIN_BATCH_SIZES} batch sizes; run more trials (trials_per_stratum, then `study "
        "resume`) or relax the target."
    )


def answer_line(answers: Answers) -> str:
    """One line for a terminal, a status and an MLflow description."""
    if not answers.ok:
        return f"no answer yet: {answers.reason}"
    line = (
        f"B_noise {interval(answers.b_noise)}, critical batch size "
        f"{interval(answers.critical_batch)}, perfect scaling up to "
        f"{answers.perfect_end.text()}"
    )
    if answers.recommended_batch is not None:
        line += (
            f"; {answers.accelerators} accelerators: "
            f"{recommendation_text(answers.recommended_batch)}, lr "
            f"{fmt(answers.recommended_lr.estimate)}"
        )
    return line + f" ({percent(answers.confidence)} intervals, {answers.surrogate.trials} trials)"


def answer_rows(answers: Answers, free: ModelFree | None = None) -> list[tuple[str, str, str, str]]:
    """The rows of the report's answers table: quantity, estimate, interval, comment (the
    model-free reading of the measured steps beside the model's, where ``free`` gives one)."""
    if not answers.ok:
        return [("model of every trial", "no answer yet", "", answers.reason)]
    measured = _measured(free)
    rows = []
    for name, answer in zip(ANSWER_NAMES, (getattr(answers, n) for n in ANSWER_NAMES)):
        if answer is None:
            continue
        span = batch_range(answer) if answer.batch else answer_span(answer)
        rows.append((answer.name, fmt(answer.estimate), span, measured.get(name, "")))
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


def _measured(free: ModelFree | None) -> dict[str, str]:
    """The model-free readings as comments of the answers table, by answer."""
    if free is None or not free.ok:
        return {}
    if free.beyond:
        critical = f"measured: beyond {fmt(free.bracket[0])}" if free.bracket else ""
    else:
        low, high = free.bracket
        critical = f"measured: {fmt(free.critical)} (between {fmt(low)} and {fmt(high)})"
    start = free.max_parallel_start
    return {
        "critical_batch": critical,
        "perfect_end": f"measured: {fmt(free.perfect_end)}",
        "max_parallel_start": "measured: not within the measured sizes"
        if math.isinf(start)
        else f"measured: {fmt(start)}",
    }


def misfit_notes(answers: Answers) -> list[str]:
    """A note when S(B) misfits the trials (steps per batch size left free fit them better)."""
    if not answers.ok or not answers.surrogate.misfits:
        return []
    return [
        "S(B) = S_min (1 + (B_noise/B)^q)^(1/q) misfits the trials: steps per batch size left "
        f"free fit them better (likelihood-ratio p = {fmt(answers.surrogate.misfit_p_value)}); "
        "read the answers with care and look at the steps-to-result figure."
    ]


def disagreement_notes(answers: Answers, check: CrossCheck) -> list[str]:
    """Where the best trial of each batch size (`CrossCheck`) disagrees with the model beyond
    both intervals (a batch size: outside the model's interval), one sentence each."""
    if not answers.ok:
        return []
    out = []
    fit = check.noise_scale
    if fit.ok and fit.b_noise_ci is not None:
        low, high = fit.b_noise_ci
        if not answers.b_noise.covers(fit.b_noise) and not low <= answers.b_noise.estimate <= high:
            out.append(
                f"The best trial of each batch size gives B_noise = {fmt(fit.b_noise)} "
                f"({fmt(low)} to {fmt(high)}), outside the model's {interval(answers.b_noise)}: "
                "one lucky or unlucky trial per batch size moves that fit; the model reads "
                "every trial."
            )
    regimes = check.regimes
    if regimes.ok and not answers.perfect_end.covers(float(regimes.perfect_end)):
        out.append(
            f"The best trials' perfect scaling ends at {fmt(regimes.perfect_end)}, outside the "
            f"model's {batch_range(answers.perfect_end)}."
        )
    start, model_start = regimes.max_parallel_start, answers.max_parallel_start
    if regimes.ok and not model_start.covers(math.inf if start is None else float(start)):
        seen = "does not start" if start is None else f"starts at {fmt(start)}"
        out.append(
            f"By the best trials maximal data parallelism {seen}, outside the model's "
            f"{batch_range(model_start)}."
        )
    rec, best = answers.recommended_batch, check.recommendation
    if rec is not None and best.ok and not rec.covers(float(best.batch_size)):
        out.append(
            f"The best trials would recommend batch {fmt(best.batch_size)} for "
            f"{answers.accelerators} accelerators, outside the model's {batch_range(rec)}."
        )
    return out
