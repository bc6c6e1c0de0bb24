"""The report's answer and the fixed text every format shares: the answer paragraph, the
terminal summary, the method, "no notes" and how the report was made.

The writers call `answer`, `how_it_was_made`, `METHOD` and `NO_NOTES`; the command line prints
`summary_lines`. The notes on thin data are `study.report.notes`; the predicted-noise and
time-to-result sections are `study.report.noise_prose` and `study.report.time_prose`.
Intervals are said at the confidence the fits used, e.g. "95% CI" by default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from study.analysis.fitting import as_number
from study.analysis.recommend import Recommendation
from study.analysis.table import BATCH_SIZE, STRATEGY
from study.report.answer_prose import answer_line, report_answer_sentences
from study.report.formatting import ci_text, fmt, percent
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

METHOD = (
    "Steps to result for a batch size is the fewest training steps at which any of its trials "
    "first met the target at an evaluation (not interpolated); a target never met counts as "
    "infinitely many steps (Shallue et al. 2018). Steps are pooled over strategies, since "
    "synchronous data parallelism does the same arithmetic as one device. The noise-scale "
    "model S(B) = S_min (1 + B_noise/B) (McCandlish et al. 2018) is fitted by least squares on "
    "log steps, each batch size's best trial placed at the geometric midpoint of its evaluation "
    "bracket (between the evaluation where it first met the target and the one before); its "
    "intervals are profile-likelihood intervals, whose coverage was checked on simulated studies "
    "(benchmarks/interval_coverage.py). Time to result is steps to result times the measured "
    "seconds per step: from the throughput probe (`study probe`, the median over its repeats) "
    "where it ran, else from the trials' own training times. The predicted B_simple = "
    "tr(Sigma)/|G|^2 is the gradient noise scale measured during training (McCandlish et al. "
    "2018, Appendix A: per-replica against all-reduced gradients, or two micro-batches), from "
    "the study's pilot run or its trials."
)
"""How the numbers were measured and fitted, at the end of the HTML and Markdown reports."""

NO_NOTES = "No notes: every batch size reached the target and every fit had enough data."

_RULES = {
    "linear": "consistent with the linear scaling rule (alpha = 1)",
    "square-root": "consistent with the square-root rule (alpha = 0.5)",
    "both": "too uncertain to tell the linear from the square-root rule",
    "neither": "consistent with neither the linear nor the square-root rule",
}


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
        return out
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
    out += report_answer_sentences(report)
    if report.answers is not None and report.answers.ok:
        out.append("What follows reads the best trial of each batch size alone, as a cross-check.")
    fit, regimes = report.noise_scale, report.regimes
    if fit.ok:
        out.append(
            f"The fitted critical batch size is B_noise = {fmt(fit.b_noise)}"
            f"{ci_text(fit.b_noise_ci, fit.confidence)}, with S_min = {fmt(fit.s_min)} steps and "
            f"E_min = {fmt(fit.e_min)} examples: at B_noise a run needs twice the minimum steps "
            "and twice the minimum examples."
        )
    else:
        out.append(f"There is no noise-scale fit: {fit.reason}.")
    if regimes.ok:
        text = f"Perfect scaling holds up to batch size {fmt(regimes.perfect_end)}"
        if regimes.max_parallel_start is not None:
            text += (
                f"; maximal data parallelism starts at batch size {fmt(regimes.max_parallel_start)}"
            )
        else:
            text += (
                "; maximal data parallelism does not start within the measured batch sizes "
                f"(up to {fmt(regimes.batch_sizes[-1])})"
            )
        out.append(text + ".")
    lr = report.lr_fit
    if lr.ok:
        out.append(
            f"The best learning rate grows as B^{fmt(lr.alpha)}"
            f"{ci_text(lr.alpha_ci, lr.confidence)}, {_RULES[lr.rule]}."
        )
    out.append(_recommendation_sentence(report.recommendation, fit.confidence))
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


def _recommendation_sentence(rec: Recommendation, confidence: float) -> str:
    if not rec.ok:
        return f"No recommendation for {rec.accelerators} accelerators: {rec.reason}."
    hardware = "measured throughput" if rec.time_source == "throughput" else "ideal hardware"
    return (
        f"For {rec.accelerators} accelerators, use a global batch size of "
        f"{fmt(rec.batch_size)} ({fmt(rec.per_device_batch)} per device) with learning rate "
        f"{fmt(rec.learning_rate)} ({rec.lr_source}): expected speed-up "
        f"{fmt(rec.step_speedup)}x in steps{ci_text(rec.step_speedup_ci, confidence)} and "
        f"{fmt(rec.time_speedup)}x in wall time"
        f" ({hardware}{', ' + rec.strategy if rec.strategy else ''}) over batch size "
        f"{fmt(rec.base_batch_size)} on one accelerator."
    )


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
    if report.answers is not None:
        lines.append(f"answer: {answer_line(report.answers)}")
    fit, regimes = report.noise_scale, report.regimes
    if fit.ok:
        line = (
            f"B_noise = {fmt(fit.b_noise)}{ci_text(fit.b_noise_ci, fit.confidence)}, "
            f"S_min = {fmt(fit.s_min)}"
        )
        if regimes.ok:
            line += f"; perfect scaling up to {fmt(regimes.perfect_end)}"
            if regimes.max_parallel_start is not None:
                line += f", maximal data parallelism from {fmt(regimes.max_parallel_start)}"
        lines.append(line)
    else:
        lines.append(f"no noise-scale fit: {fit.reason}")
    rec = report.recommendation
    if rec.ok:
        lines.append(
            f"{rec.accelerators} accelerators: batch {fmt(rec.batch_size)}, lr "
            f"{fmt(rec.learning_rate)}, {fmt(rec.step_speedup)}x fewer steps, "
            f"{fmt(rec.time_speedup)}x faster ({rec.time_source})"
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
        ("intervals", f"profile likelihood, {percent(report.confidence)}"),
        ("accelerators", str(report.accelerators)),
        ("made", report.created),
    ]
    if report.time_model.ok:
        rows.append(("throughput probe", probe_text(report.time_model)))
    if report.predicted_noise.ok:
        rows.append(("predicted B_simple", predicted_source(report.predicted_noise)))
    rows += [(str(k), str(v)) for k, v in report.context.items()]
    return rows
