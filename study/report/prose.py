"""The report's sentences: the answer paragraph, the notes on thin data, the terminal summary,
and the fixed text every format shares (the method, "no notes", how the report was made).

`build_report` calls the ``*_notes`` functions once and keeps their sentences in
``ScalingReport.notes``; the writers call `answer`, `how_it_was_made`, `METHOD` and `NO_NOTES`.
Intervals are said at the confidence the fits used, e.g. "95% CI" by default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from study.analysis.fitting import MIN_BATCH_SIZES, as_number
from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.noise_scale import SEARCH_FACTOR, NoiseScaleFit
from study.analysis.predicted_noise import ORDER_OF_MAGNITUDE, PILOT, PredictedNoise
from study.analysis.recommend import Recommendation
from study.analysis.table import BATCH_SIZE, STATE, STRATEGY, metric_columns
from study.analysis.time_model import TimeModel
from study.config.target import Target
from study.report.formatting import ci_text, fmt, percent

if TYPE_CHECKING:  # pragma: no cover
    from study.report.build import ScalingReport

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


# ------------------------------------------------------------------------------------ summary


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
            line += f": {_agreement_word(report)} with B_noise ({ratio_text(agreement.ratio)})"
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


# ------------------------------------------------------------------ predicted noise scale

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
        out.append(f"There is no fitted B_noise to compare it with: {fit.reason}.")
        out.append(NOISE_CAVEAT)
        return out
    return [*out, agreement_sentence(report), NOISE_CAVEAT]


def ratio_text(ratio: float) -> str:
    """``"B_noise is 2.5 times B_simple"``, or the other way round when B_simple is larger."""
    if ratio >= 1:
        return f"B_noise is {fmt(ratio)} times B_simple"
    return f"B_simple is {fmt(1 / ratio)} times B_noise"


def _agreement_word(report: ScalingReport) -> str:
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
        f"fitted B_noise = {fmt(fit.b_noise)}{ci_text(fit.b_noise_ci, fit.confidence)}"
    )
    times = ratio_text(agreement.ratio)
    if _agreement_word(report) == "agrees loosely":
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


# ------------------------------------------------------------------------- time to result

PROBE_HOW_TO = (
    "No throughput probe: `study probe NAME` measures seconds per step for every batch size "
    "and strategy of the study (short untracked runs, several repeats) and stores them with "
    "it; the next report then predicts the time to result of each and says which batch size "
    "and strategy minimise wall time."
)
"""What the time-to-result section says when the study has no probe."""


def probe_text(model: TimeModel) -> str:
    """How the probe was made, e.g. ``"2026-11-30 09:40 UTC, 2 x Intel Xeon (CPU), 3 repeats of
    100 steps"`` (the parts it stored)."""
    parts = [p for p in (model.measured_at, model.hardware) if p]
    if model.repeats:
        runs = f"{model.repeats} repeat{'' if model.repeats == '1' else 's'}"
        parts.append(runs + (f" of {model.probe_steps} steps" if model.probe_steps else ""))
    return ", ".join(parts)


def time_sentences(model: TimeModel) -> list[str]:
    """The time-to-result section: which batch size and strategy minimise wall time, what the
    fewest steps would cost instead, and what extrapolated rows mean; or how to probe."""
    if not model.ok or model.best is None:
        return [
            PROBE_HOW_TO
            if "no throughput probe" in model.reason
            else _sentence(f"No time to result: {model.reason}")
        ]
    out = fastest_sentences(model)
    extrapolated = model.table[model.table["extrapolated"].astype(bool)]
    if len(extrapolated):
        replicas = ", ".join(dict.fromkeys(str(fmt(r)) for r in extrapolated["replicas"]))
        out.append(
            f"Rows for {replicas} replicas were not measured: they extrapolate the probe's "
            "per-replica throughput at the most replicas it ran, linearly, with no "
            "communication cost, so they are lower bounds on time, not predictions; probe "
            "those strategies to know."
        )
    return out


def fastest_sentences(model: TimeModel) -> list[str]:
    """Which probed batch size and strategy reach the target in the least wall time and, if
    another takes fewer steps, how much longer that one takes (empty without a choice)."""
    if not model.ok or model.best is None:
        return []
    best = model.best
    how = probe_text(model)
    out = [
        f"With the seconds per step of the throughput probe ({how}), batch size "
        f"{fmt(best[BATCH_SIZE])} on {best[STRATEGY]} reaches the target in the least wall "
        f"time: {fmt(best['time_to_result'])} s ({fmt(best['steps_to_result'])} steps, "
        f"{best['steps_source']}, at {fmt(best['seconds_per_step'])} s per step)."
    ]
    fewest = model.fewest_steps
    if fewest is not None and (
        fewest[BATCH_SIZE] != best[BATCH_SIZE] or fewest[STRATEGY] != best[STRATEGY]
    ):
        out.append(
            f"The fewest steps ({fmt(fewest['steps_to_result'])}, batch size "
            f"{fmt(fewest[BATCH_SIZE])} on {fewest[STRATEGY]}) would take "
            f"{fmt(fewest['time_to_result'])} s, {fmt(model.slowdown_of_fewest_steps)} times as "
            "long."
        )
    return out


# -------------------------------------------------------------------------------------- notes


def data_notes(
    flat: pd.DataFrame,
    target: Target,
    trials: pd.DataFrame,
    state: str,
    study: str,
    metric_missing: bool,
) -> list[str]:
    """Notes on the data as a whole: none yet, the target metric never measured, a study still
    running or incomplete."""
    notes = []
    if flat.empty:
        notes.append(f"The study {study} has no measurements yet: no trial has been recorded.")
    elif metric_missing:
        have = ", ".join(metric_columns(flat)) or "none"
        notes.append(
            f"The target metric {target.metric} was never measured (the measurements have: "
            f"{have}), so no steps to result could be read off; pass --target with one of those."
        )
    running = int((trials[STATE].astype(str) == "running").sum()) if not trials.empty else 0
    if state == "running" or running:
        progress = f" ({running} trial(s) in progress)" if running else ""
        notes.append(
            f"The study is still running{progress}: these results are provisional and will "
            f"change; run `study report {study}` again when it is done."
        )
    elif state == "incomplete":
        notes.append(
            "The study is incomplete: not every planned trial has run, so a batch size may "
            f"look worse than it is; `study resume {study}` runs the rest."
        )
    return notes


def thin_notes(steps: pd.DataFrame, target: Target) -> list[str]:
    """Notes on batch sizes that never reached the target, and on too few that did."""
    notes = []
    finite = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float))
    never = steps.loc[~finite]
    if not never.empty:
        parts = [
            f"{as_number(r[BATCH_SIZE])} ({_trials_text(r)})" for r in never.to_dict("records")
        ]
        word = "Batch size" if len(parts) == 1 else "Batch sizes"
        notes.append(
            f"{word} {_join(parts)} never reached the target {target}; a target never met "
            "counts as infinitely many steps, and such batch sizes are left out of the fits."
        )
    reached = steps.loc[finite, BATCH_SIZE]
    if len(steps) and reached.nunique() < MIN_BATCH_SIZES:
        which = f" ({_join(reached)})" if len(reached) else ""
        notes.append(
            f"Only {reached.nunique()} batch size(s){which} reached the target, and the "
            "noise-scale fit S(B) = S_min (1 + B_noise/B) has two parameters and needs at "
            f"least {MIN_BATCH_SIZES} batch sizes to say anything about its shape: there is "
            "no B_noise, no learning-rate power law and no recommendation. Measure more batch "
            "sizes (or relax the target)."
        )
    return notes


def edge_notes(steps: pd.DataFrame) -> list[str]:
    """Notes on best learning rates on the edge of the searched range."""
    notes = []
    for edge, direction in (("high", "upwards"), ("low", "downwards")):
        rows = steps[steps["lr_edge"].astype(str) == edge]
        if rows.empty:
            continue
        word = "batch size" if len(rows) == 1 else "batch sizes"
        notes.append(
            f"The best learning rate sits on the {edge} edge of the searched range at {word} "
            f"{_join(rows[BATCH_SIZE])}: the true optimum may lie outside it, so widen the "
            f"learning-rate range {direction} there."
        )
    return notes


def lr_left_out_notes(batch_sizes: list[float]) -> list[str]:
    """A note naming the batch sizes the learning-rate power law left out (none if none)."""
    if not batch_sizes:
        return []
    return [
        f"The learning-rate power law leaves out batch size(s) {_join(batch_sizes)}, whose best "
        "rate sits on the edge of the searched range and so only bounds the true optimum."
    ]


def fit_notes(
    fit: NoiseScaleFit,
    lr_fit: LrPowerLawFit,
    rec: Recommendation,
    steps: pd.DataFrame,
    timed: pd.DataFrame,
) -> list[str]:
    """The fits' own notes as sentences, and why a fit or the recommendation is missing."""
    thin = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float)).sum() < MIN_BATCH_SIZES
    notes = []
    if fit.ok:
        notes += [
            _sentence(f"Noise-scale fit: {n}") for n in fit.notes if not n.startswith("excluded")
        ]
        notes += _open_interval_notes(fit)
    if lr_fit.ok:
        notes += [_sentence(f"Learning-rate fit: {n}") for n in lr_fit.notes]
        if lr_fit.r_squared > 0.999:
            notes.append(
                "The best learning rates lie almost exactly on a power law (R^2 above 0.999), "
                "hence the narrow interval for alpha. If the winning trials were proposed by extrapolating from other batch sizes (Optuna's "
                "transfer proposals), alpha reflects that extrapolation as much as the optimum."
            )
    elif not thin and lr_fit.reason:
        notes.append(_sentence(f"No learning-rate power law: {lr_fit.reason}"))
    if not rec.ok and not thin:
        notes.append(
            _sentence(f"No recommendation for {rec.accelerators} accelerators: {rec.reason}")
        )
    if rec.ok:
        notes += [_sentence(f"Recommendation: {n}") for n in rec.notes]
        if timed.empty:
            notes.append(
                "The measurements hold no training times, so the wall-time speed-up assumes "
                "ideal hardware (seconds per step proportional to the per-device batch)."
            )
    return notes


def _open_interval_notes(fit: NoiseScaleFit) -> list[str]:
    """Say so when the interval of B_noise runs into the fit's search bounds."""
    if fit.b_noise_ci is None or not fit.batch_sizes:
        return []
    low, high = fit.b_noise_ci
    smallest, largest = min(fit.batch_sizes), max(fit.batch_sizes)
    level = percent(fit.confidence)
    notes = []
    if high >= 0.99 * largest * SEARCH_FACTOR:
        notes.append(
            f"The {level} interval of B_noise reaches the upper end of the searched range "
            f"({fmt(largest * SEARCH_FACTOR)}, {SEARCH_FACTOR:g} x the largest batch size): the "
            "data do not bound B_noise from above; measure larger batch sizes."
        )
    if low <= 1.01 * smallest / SEARCH_FACTOR:
        notes.append(
            f"The {level} interval of B_noise reaches the lower end of the searched range "
            f"({fmt(smallest / SEARCH_FACTOR)}): the data do not bound B_noise from below; "
            "measure smaller batch sizes."
        )
    return notes


# ------------------------------------------------------------------------------------ helpers


def _sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop."""
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _trials_text(row: Mapping[str, Any]) -> str:
    """``"6 trials"`` or ``"6 trials, 2 diverged"``."""
    text = f"{int(row['trials'])} trial{'s' if int(row['trials']) != 1 else ''}"
    if int(row["diverged"]):
        text += f", {int(row['diverged'])} diverged"
    return text


def _join(values: Any) -> str:
    """``"8, 16 and 32"``: numbers shown plainly, strings as they are."""
    items = [v if isinstance(v, str) else str(as_number(v)) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
