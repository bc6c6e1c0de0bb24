"""The report's notes: plain sentences on thin data, computed once by `build_report` and kept
in ``ScalingReport.notes``.

Each function returns the notes of one kind (none when there is nothing to say): `data_notes`
(no measurements, the target metric never measured, a study still running or incomplete),
`crossing_notes` (the hold rule, crossings that fell back), `seed_notes` (the spread of
steps over training seeds at one point), `thin_notes` (batch sizes that never reached the target, too few that did), `edge_notes` (best
learning rates on the edge of the searched range), `lr_left_out_notes` and `fit_notes` (the
fits' own notes, and why a fit or the recommendation is missing).

Example::

    thin_notes(steps, Target.parse("val_accuracy>=0.9"))
    # ["Batch size 512 (6 trials, 2 diverged) never reached the target ...", ...]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.fitting import MIN_BATCH_SIZES, as_number
from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.measures import FELL_BACK
from study.analysis.noise_scale import SEARCH_FACTOR, NoiseScaleFit
from study.analysis.recommend import Recommendation
from study.analysis.seeds import SeedNoise
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE, metric_columns
from study.config.target import Target
from study.report.formatting import fmt, join_words, percent, sentence


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


def crossing_notes(trials: pd.DataFrame, target: Target) -> list[str]:
    """How steps to result were read off the curves (the target's hold rule), and the trials
    whose crossing of the target fell back before one held."""
    if trials.empty:
        return []
    if not target.hold.active:
        return [
            "Steps to result are read at the first evaluation that met the target (the study "
            "ran without a hold rule: target_hold off, or recorded before it); a metric that "
            "hovers near its target can cross it and fall back, so they can depend on the "
            "evaluation cadence."
        ]
    fell = trials[FELL_BACK].to_numpy(dtype=int) if FELL_BACK in trials.columns else np.zeros(0)
    if not fell.any():
        return []
    worst = trials.iloc[int(np.argmax(fell))]
    return [
        f"{int((fell > 0).sum())} of {len(trials)} trials met the target {target} and fell "
        f"back below it before it held (up to {int(fell.max())} times, batch size "
        f"{as_number(worst[BATCH_SIZE])} at learning rate {fmt(worst[LEARNING_RATE])}); steps "
        f"to result count from the step the target held from, {target.hold}, which does not "
        "depend on the evaluation cadence."
    ]


def seed_notes(noise: SeedNoise, trials: pd.DataFrame) -> list[str]:
    """How much steps to target move between training seeds at one point, or that it was not
    measured."""
    if trials.empty:
        return []
    if not noise.ok:
        return [
            "No point was reached under two or more training seeds, so how far steps to target "
            "move with the seed alone is not measured here (a 10-20% spread is common); "
            "tuner: {confirm: {top: 1, seeds: 2}} measures it."
        ]
    left = (
        f"; {noise.unreached} trial(s) of those points did not reach it" if noise.unreached else ""
    )
    return [
        f"Seed noise: at one point, steps to target vary by a factor of about "
        f"{fmt(noise.factor)} between training seeds (standard deviation of log steps "
        f"{fmt(noise.sigma)}, from {noise.points} point(s) and {noise.trials} trials{left}); "
        "differences between batch sizes smaller than that are within seed noise."
    ]


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
            f"{word} {_listed(parts)} never reached the target {target}; a target never met "
            "counts as infinitely many steps, and such batch sizes are left out of the fits."
        )
    reached = steps.loc[finite, BATCH_SIZE]
    if len(steps) and reached.nunique() < MIN_BATCH_SIZES:
        which = f" ({_listed(reached)})" if len(reached) else ""
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
            f"{_listed(rows[BATCH_SIZE])}: the true optimum may lie outside it, so widen the "
            f"learning-rate range {direction} there."
        )
    return notes


def lr_left_out_notes(batch_sizes: list[float]) -> list[str]:
    """A note naming the batch sizes the learning-rate power law left out (none if none)."""
    if not batch_sizes:
        return []
    return [
        f"The learning-rate power law leaves out batch size(s) {_listed(batch_sizes)}, whose best "
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
            sentence(f"Noise-scale fit: {n}") for n in fit.notes if not n.startswith("excluded")
        ]
        notes += _open_interval_notes(fit)
    if lr_fit.ok:
        notes += [sentence(f"Learning-rate fit: {n}") for n in lr_fit.notes]
        if lr_fit.r_squared > 0.999:
            notes.append(
                "The best learning rates lie almost exactly on a power law (R^2 above 0.999), "
                "hence the narrow interval for alpha. If the winning trials were proposed by extrapolating from other batch sizes (Optuna's "
                "transfer proposals), alpha reflects that extrapolation as much as the optimum."
            )
    elif not thin and lr_fit.reason:
        notes.append(sentence(f"No learning-rate power law: {lr_fit.reason}"))
    if not rec.ok and not thin:
        notes.append(
            sentence(f"No recommendation for {rec.accelerators} accelerators: {rec.reason}")
        )
    if rec.ok:
        notes += [sentence(f"Recommendation: {n}") for n in rec.notes]
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


def _trials_text(row: Mapping[str, Any]) -> str:
    """``"6 trials"`` or ``"6 trials, 2 diverged"``."""
    text = f"{int(row['trials'])} trial{'s' if int(row['trials']) != 1 else ''}"
    if int(row["diverged"]):
        text += f", {int(row['diverged'])} diverged"
    return text


def _listed(values: Any) -> str:
    """``"8, 16 and 32"``: numbers shown plainly, strings as they are (`join_words`)."""
    return join_words(values, last=" and ")
