"""The report's answer and the fixed text every format shares: the answer paragraph, the
terminal summary, the method, "no notes" and how the report was made.

The writers call `answer`, `how_it_was_made`, `method_text` and `NO_NOTES`; the command line
prints `summary_lines`. The method paragraph is made from what the report ran (the target's hold
rule, the model, the intervals, the training seeds), so it cannot drift from the code. The notes on thin data are `study.report.notes`; the predicted-noise and
time-to-result sections are `study.report.noise_prose` and `study.report.time_prose`.
Intervals are said at the confidence the fits used, e.g. "95% CI" by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from study.analysis.answers import DRAWS, Answers
from study.analysis.covariance import SHARP_PENALTY, SOFT_PENALTY
from study.analysis.fitting import as_number
from study.analysis.surrogate import B_NOISE_RANGE
from study.analysis.table import BATCH_SIZE, SEED, STRATEGY
from study.report.answer_prose import (
    MODEL,
    answer_line,
    answer_sentences,
    interval,
    no_answer_sentence,
    recommendation_text,
    speedup_text,
)
from study.report.formatting import fmt, join_words, percent
from study.report.noise_prose import (
    agreement_sentence,
    agreement_word,
    noise_sentences,
    predicted_source,
    ratio_text,
)
from study.report.time_prose import fastest_sentences, probe_text

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport

NO_NOTES = "No notes: every batch size reached the target and every fit had enough data."


def answer(report: ScalingReport) -> str:
    """The question the study answers, answered in one paragraph of plain sentences."""
    return " ".join(_answer_sentences(report))


def _answer_sentences(report: ScalingReport) -> list[str]:
    steps, target = report.steps, report.target
    training = _training(report)
    out = [
        f"How many training steps does it take to reach {target}{training} as the global batch "
        f"size grows, and which batch size should {report.accelerators} accelerators use?"
    ]
    reached = steps[np.isfinite(steps["steps_to_result"].to_numpy(dtype=float))]
    if reached.empty:
        out.append("No batch size reached the target, so the study cannot answer that yet.")
        return [*out, no_answer_sentence(report.answers)]
    first, last = reached.iloc[0], reached.iloc[-1]
    out.append(
        f"Steps to result fell from {fmt(first['steps_to_result'])} at batch size "
        f"{fmt(first[BATCH_SIZE])} to {fmt(last['steps_to_result'])} at batch size "
        f"{fmt(last[BATCH_SIZE])}"
        + (
            f" ({len(reached)} of {len(steps)} batch sizes reached the target)."
            if len(reached) < len(steps)
            else "."
        )
    )
    out += answer_sentences(report.answers, recommendation=False)
    if report.answers.ok:
        out.append(_recommendation_sentence(report))
    if report.time_model.ok:
        out += fastest_sentences(report.time_model)
    if report.noise_agreement.ok:
        out.append(agreement_sentence(report))
    elif report.predicted_noise.ok:
        out.append(noise_sentences(report)[0])
    return out


def _training(report: ScalingReport) -> str:
    """``", training mlp on mnist1d with nesterov,"`` (empty when the facts are unknown)."""
    facts = report.facts
    if not facts.workload_name:
        return ""
    text = f" training {facts.model_name} on" if facts.model_name else " training on"
    text += f" {facts.workload_name}"
    if facts.optimizer_name:
        text += f" with {facts.optimizer_name}"
    return f",{text},"


def _recommendation_sentence(report: ScalingReport) -> str:
    rec, answers = report.recommendation, report.answers
    if not rec.ok:
        return f"No recommendation for {rec.accelerators} accelerators: {rec.reason}."
    hardware = "measured throughput" if rec.time_source == "throughput" else "ideal hardware"
    strategy = f", {rec.strategy}" if rec.strategy else ""
    text = (
        f"For {rec.accelerators} accelerators, use {recommendation_text(answers.recommended_batch)}"
        f", {fmt(rec.per_device_batch)} per device, with learning rate "
        f"{interval(answers.recommended_lr)}: {speedup_text(answers)}"
    )
    if rec.batch_size != rec.base_batch_size:
        text += (
            f", and {fmt(rec.time_speedup)}x less wall time ({hardware}{strategy}) than batch "
            f"{fmt(rec.base_batch_size)} on one accelerator"
        )
    return text + "."


def summary_lines(report: ScalingReport) -> list[str]:
    """Three to five short lines for a terminal."""
    steps = report.steps
    lines = [
        f"{report.study}: target {report.target}, {len(steps)} batch size(s), "
        f"{len(report.trials)} trials ({report.state})"
    ]
    if len(steps):
        lines.append(
            "steps to result: "
            + ", ".join(
                f"b{as_number(b)}={fmt(s)}"
                for b, s in zip(steps[BATCH_SIZE], steps["steps_to_result"])
            )
        )
    lines.append(f"answer: {answer_line(report.answers)}")
    rec = report.recommendation
    if rec.ok and rec.batch_size != rec.base_batch_size:
        lines.append(
            f"{rec.accelerators} accelerators: batch {fmt(rec.batch_size)}, lr "
            f"{fmt(rec.learning_rate)}, {fmt(rec.step_speedup)}x fewer steps and "
            f"{fmt(rec.time_speedup)}x less wall time ({rec.time_source}) than batch "
            f"{fmt(rec.base_batch_size)} on one"
        )
    prediction = report.targets.prediction if report.targets is not None else None
    if prediction is not None and prediction.ok:
        lines.append(f"prediction {prediction.line()}")
    if report.cross_check.disagreements:
        lines.append(
            f"cross-check: the best trial of each batch size disagrees with the model "
            f"({len(report.cross_check.disagreements)} note(s) in the report)"
        )
    predicted, agreement = report.predicted_noise, report.noise_agreement
    if predicted.ok:
        line = f"predicted B_simple = {fmt(predicted.b_simple)} ({predicted.source})"
        if agreement.ok:
            line += f": {agreement_word(report)} with B_noise ({ratio_text(agreement.ratio)})"
        lines.append(line)
    model = report.time_model
    if model.ok and model.best is not None:
        best = model.best
        lines.append(
            f"least wall time (probe): batch {fmt(best[BATCH_SIZE])} on {best[STRATEGY]}, "
            f"{fmt(best['time_to_result'])} s"
        )
    if report.notes:
        lines.append(f"{len(report.notes)} note(s) in the report")
    return lines


def how_it_was_made(report: ScalingReport) -> list[tuple[str, str]]:
    """The "How it was made" section as (label, value) pairs: command, target, intervals, ..."""
    rows = [
        ("command", report.command),
        ("target", str(report.target)),
        ("study", report.study),
        ("study state", report.state),
        ("trials", str(len(report.trials))),
        ("intervals", f"{percent(report.confidence)}, from the model's parameter draws"),
        ("accelerators", str(report.accelerators)),
        ("made", report.created),
    ]
    if report.time_model.ok:
        rows.append(("throughput probe", probe_text(report.time_model)))
    if report.predicted_noise.ok:
        rows.append(("predicted B_simple", predicted_source(report.predicted_noise)))
    rows += [(str(k), str(v)) for k, v in report.context.items()]
    return rows


def method_text(report: ScalingReport) -> str:
    """How the answer was made, from what this report ran: the rule that counts steps, the
    model, its intervals, the training seeds, the cross-check and the time model."""
    target, answers = report.target, report.answers
    config = report.facts.config
    exact = config is not None and config.settings.exact_steps
    if target.hold.active:
        counting = f"the step from which the target held ({target.hold})"
    else:
        counting = "the step at which the trial first met the target (no hold rule)"
    counting += (
        ", found exactly by replaying the steps since the previous evaluation"
        if exact
        else ", read at an evaluation"
    )
    seeds = report.trials[SEED].nunique() if SEED in report.trials.columns else 0
    seed_text = (
        f"The {len(report.trials)} trials ran under {seeds} training seed(s), so seed-to-seed "
        "noise is part of that trial-to-trial noise. "
        if seeds
        else ""
    )
    model = answers.surrogate
    shape = (
        ""
        if model is None or not answers.ok
        else (
            f" (this study: knee q = {fmt(model.knee)}, best rate {model.shape}, "
            f"{model.bottom} bottom, {'Student-t' if model.value('tail') > 0 else 'normal'} noise)"
        )
    )
    return (
        f"Each trial's steps to target counts {counting}; a trial that stopped short counts as "
        "'more than N steps' and a target never met as infinitely many (Shallue et al. 2018). "
        f"The answer is {MODEL}{shape}, fitted by maximum likelihood to every trial. Every "
        f"interval is the middle {percent(report.confidence)} of {DRAWS} draws of the model's "
        "parameters from their estimated covariance (curvature, widened to a sandwich where "
        "trials scatter more than the model says, each trial read through its leverage, and "
        "to a random effect per batch size), as a Student-t on the fit's residual degrees of "
        f"freedom, so the trial-to-trial noise is in each. {_knee_text(answers)}"
        f"{_open_text(answers)}{seed_text}"
        "The cross-check reads each batch size's best trial alone: McCandlish et al.'s S(B) = "
        "S_min (1 + B_noise/B) by least squares with profile-likelihood intervals, the regimes "
        "from measured steps, the overhead point by interpolation between measured batch sizes. "
        "Time to result is steps to result times the measured seconds per step (the throughput "
        "probe where it ran, else the trials' own training times)."
    )


def _knee_text(answers: Answers) -> str:
    """The sentence on the fits with the knee held at its ends that this study's draws mix in
    (`study.analysis.surrogate.Surrogate.knee_held`, ``knee_sharp``); empty when none is."""
    model = answers.surrogate if answers.ok else None
    held = (
        []
        if model is None
        else [(q, c) for q, c in ((1, model.knee_held), (8, model.knee_sharp)) if c]
    )
    if not held:
        return ""
    shares = [
        f"q = {q} ({'under 0.1%' if c.weight < 1e-3 else f'{100 * c.weight:.1f}%'} of the draws)"
        for q, c in held
    ]
    return (
        f"The draws mix in the fit with the knee held at {join_words(shares, last=' and at ')}, "
        f"each weighed by its likelihood relative to the fit's{_penalty_text()}. "
    )


def _penalty_text() -> str:
    """`SOFT_PENALTY` and `SHARP_PENALTY` in words: `` (q = 1's times exp(-1))``."""
    factors = [
        f"q = {q}'s times exp(-{p:g})" for q, p in ((1, SOFT_PENALTY), (8, SHARP_PENALTY)) if p
    ]
    return f" ({join_words(factors, last=' and ')})" if factors else ""


def _open_text(answers: Answers) -> str:
    """The sentence on intervals printed open, naming this study's; empty when none is."""
    names = [a.name for a in answers.items() if not a.batch and not a.bounded] if answers.ok else []
    if not names:
        return ""
    return (
        f"Where the draws reach the range searched for B_noise ({B_NOISE_RANGE:,.0f} times "
        "beyond the measured batch sizes), an interval's end is that range's, not one the "
        f"trials give, and is printed open ({join_words(names, last=' and ')} here). "
    )
