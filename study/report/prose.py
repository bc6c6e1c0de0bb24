"""The report's sentences: the answer paragraph, the notes on thin data, the terminal summary,
and the fixed text every format shares (the method, "no notes", how the report was made).

`build_report` calls the ``*_notes`` functions once and keeps their sentences in
``ScalingReport.notes``; the writers call `answer`, `how_it_was_made`, `METHOD` and `NO_NOTES`.
Intervals are said at the confidence the fits used, e.g. "95% CI" by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from study.analysis.fitting import MIN_BATCH_SIZES, as_number
from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.noise_scale import SEARCH_FACTOR, NoiseScaleFit
from study.analysis.recommend import Recommendation
from study.analysis.table import BATCH_SIZE, STATE, metric_columns
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
    "(benchmarks/interval_coverage.py). Time to result is steps to result times the measured seconds per step."
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
    rows += [(str(k), str(v)) for k, v in report.context.items()]
    return rows


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
