"""The report's notes: plain sentences on thin data, computed once by `build_report` and kept
in ``ScalingReport.notes``.

Each function returns the notes of one kind (none when there is nothing to say): `data_notes`
(no measurements, the target metric never measured, a study still running or incomplete),
`crossing_notes` (the hold rule, crossings that fell back), `answer_notes` (why the model of every trial has no answer, and what
would let it answer), `seed_notes` (the spread of steps over training seeds at one point),
`thin_notes` (batch sizes that never reached the target), `edge_notes` (best learning rates on
the edge of the searched range), `knee_notes` (a knee the trials do not pin) and `fit_notes`
(the recommendation's own notes).

Example::

    thin_notes(steps, Target.parse("val_accuracy>=0.9"))
    # ["Batch size 512 (6 trials, 2 diverged) never reached the target ...", ...]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from study.analysis.answers import Answers
from study.analysis.covariance import SHARP_PENALTY, SOFT_PENALTY
from study.analysis.fitting import MIN_BATCH_SIZES, as_number
from study.analysis.likelihood import MIN_REACHED, MIN_TRIALS, RATE_CAP
from study.analysis.measures import FELL_BACK
from study.analysis.parameters import Param
from study.analysis.recommend import Recommendation
from study.analysis.seeds import SeedNoise
from study.analysis.surrogate import B_NOISE_RANGE
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE, metric_columns
from study.config.target import Target
from study.ledger.summary import StudyState
from study.report.formatting import fmt, join_words, percent, sentence


def data_notes(
    flat: pd.DataFrame,
    target: Target,
    trials: pd.DataFrame,
    state: StudyState,
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
    """Notes on batch sizes that never reached the target."""
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
            "counts as infinitely many steps: the model reads their trials as 'more than N "
            "steps', and no answer is read at them."
        )
    return notes


def edge_notes(steps: pd.DataFrame, search_range: tuple[float, float] | None = None) -> list[str]:
    """Notes on best learning rates at the highest or lowest rate tried. On the edge of the
    study's ``search_range`` (or with the range unknown), widen the range; inside it, the
    optimum may lie beyond the rate tried, and more trials there would tell."""
    notes = []
    for edge, direction, extreme in (
        ("high", "upwards", "highest"),
        ("low", "downwards", "lowest"),
    ):
        rows = steps[steps["lr_edge"].astype(str) == edge]
        if rows.empty:
            continue
        if search_range is None:
            on_range = np.ones(len(rows), dtype=bool)
        else:
            best = rows["best_learning_rate"].to_numpy(dtype=float)
            bound = search_range[1] if edge == "high" else search_range[0]
            on_range = np.abs(np.log(best / bound)) <= math.log(1.0001)
        if on_range.any():
            notes.append(
                f"The best learning rate sits on the {edge} edge of the searched range at "
                f"{_sizes(rows.loc[on_range, BATCH_SIZE])}: the true optimum may lie outside "
                f"it, so widen the learning-rate range {direction} there."
            )
        if (~on_range).any():
            low, high = search_range
            notes.append(
                f"The best learning rate is the {extreme} rate tried at "
                f"{_sizes(rows.loc[~on_range, BATCH_SIZE])}, inside the searched range "
                f"({fmt(low)} to {fmt(high)}): the optimum may lie "
                f"{'above' if edge == 'high' else 'below'} it, and more trials there would tell."
            )
    return notes


def _sizes(batch_sizes: pd.Series) -> str:
    """``"batch size 8"`` or ``"batch sizes 8 and 16"``."""
    word = "batch size" if len(batch_sizes) == 1 else "batch sizes"
    return f"{word} {_listed(batch_sizes)}"


def answer_notes(answers: Answers, *, trials_planned: int = 0) -> list[str]:
    """Why the model of every trial has no answer, and what would let it answer (none when it
    has one)."""
    if answers.ok:
        return _open_interval_notes(answers)
    planned = f" (the study plans {trials_planned})" if trials_planned else ""
    return [
        f"The model of every trial has no answer yet: {answers.reason}. It needs at least "
        f"{MIN_TRIALS} trials{planned}, {MIN_REACHED} of them reaching the target, over at "
        f"least {MIN_BATCH_SIZES} batch sizes: raise trials_per_stratum in the study file and "
        "run `study resume NAME`, or relax the target."
    ]


def extrapolation_notes(answers: Answers, steps: pd.DataFrame) -> list[str]:
    """Notes naming the batch sizes where the model's best learning rate sits on its cap
    (`RATE_CAP` times the highest rate tried there: steps may fall further at rates no trial
    ran) or lies below the lowest rate tried by more than `EXTRAPOLATION`."""
    if not answers.ok or steps.empty:
        return []
    b = steps[BATCH_SIZE].to_numpy(dtype=float)
    best = answers.surrogate.best_lr(b)
    low, high = steps["lr_min"].to_numpy(dtype=float), steps["lr_max"].to_numpy(dtype=float)
    capped, below = best > _ON_CAP * RATE_CAP * high, best < low / EXTRAPOLATION
    notes = []
    if capped.any():
        parts = [f"{as_number(x)} ({fmt(t)})" for x, t in zip(b[capped], high[capped])]
        notes.append(
            "The model's best learning rate reaches its cap, "
            f"{RATE_CAP:g} times the highest rate tried, at batch size(s) {_listed(parts)}: "
            "the trials there were still getting faster towards the highest rate, so their "
            "steps at the best rate may be fewer than the answers assume; run trials at higher "
            "rates there (a wider learning-rate range) to pin it."
        )
    if below.any():
        parts = [f"{as_number(x)} ({fmt(r)} against {fmt(t)})"
                 for x, r, t in zip(b[below], best[below], low[below])]  # fmt: skip
        notes.append(
            f"The model's best learning rate lies far below the lowest rate tried at batch "
            f"size(s) {_listed(parts)}: its steps there are an extrapolation to rates no trial "
            "ran, and the answers lean on it; run trials at those rates (a wider learning-rate "
            "range there) to check it."
        )
    return notes


EXTRAPOLATION = 3.0
"""How far below the rates tried at a batch size the model's best rate may lie unremarked."""

_ON_CAP = 0.95
"""A best rate within this share of its cap (`RATE_CAP`) is read as on it."""


def knee_notes(answers: Answers) -> list[str]:
    """Say so when the trials do not pin the knee's sharpness q: the fit with q held at 1 or at
    8 is within the likelihood ratio's bound of the fit at the answers' confidence (chi-square
    on one degree of freedom: 3.84 at 95%, a likelihood at least 0.147 of the fit's). Those
    readings are in the intervals' draws (`study.analysis.surrogate.Surrogate.knee_held`,
    ``knee_sharp``); the note names their B_noise and what would pin the knee."""
    model = answers.surrogate if answers.ok else None
    if model is None:
        return []
    bound = math.exp(-0.5 * float(stats.chi2.ppf(answers.confidence, df=1)))
    readings = [(1, model.knee_held, SOFT_PENALTY), (8, model.knee_sharp, SHARP_PENALTY)]
    rest = 1.0 - sum(c.weight for _, c, _ in readings if c is not None)
    close = [
        f"q = {q} (B_noise {fmt(math.exp(c.theta[Param.LOG_B_NOISE]))})"
        for q, c, penalty in readings
        if c is not None and rest > 0 and c.weight / rest * math.exp(penalty) >= bound
    ]
    if not close:
        return []
    low, high = answers.b_noise.low, answers.b_noise.high
    inside = [b for b in model.batch_sizes if low / 2 <= b <= 2 * high]
    advice = (
        f"more trials at batch sizes {_listed([as_number(b) for b in inside])} would pin it"
        if len(inside) >= 3
        else f"batch sizes between {fmt(low)} and {fmt(high)}, where the curve bends, would pin it"
    )
    return [
        f"The trials do not pin the knee's sharpness: the fit reads q = {fmt(model.knee)} "
        f"(B_noise {fmt(answers.b_noise.estimate)}), and the curve held at "
        f"{join_words(close, last=' or at ')} fits them within the likelihood's "
        f"{percent(answers.confidence)} bound. "
        "The intervals of B_noise, the critical batch size and the speed-up include those "
        f"readings; {advice}."
    ]


def _open_interval_notes(answers: Answers) -> list[str]:
    """Say so when the interval of B_noise runs far past the measured batch sizes, or to the end
    of the range the model searches (an open end: the trials do not bound it there)."""
    sizes = answers.surrogate.batch_sizes
    low, high = answers.b_noise.low, answers.b_noise.high
    level = percent(answers.confidence)
    notes = []
    if answers.b_noise.open_high:
        notes.append(
            f"The {level} interval of B_noise has no upper end (its draws reach the end of the "
            f"range the model searches, {B_NOISE_RANGE:,.0f} x the largest batch size "
            f"({fmt(max(sizes))})): the data do not bound B_noise from above; measure larger "
            "batch sizes."
        )
    elif high >= OPEN_FACTOR * max(sizes):
        notes.append(
            f"The {level} interval of B_noise reaches {fmt(high)}, over {OPEN_FACTOR:g} x the "
            f"largest batch size ({fmt(max(sizes))}): the data do not bound B_noise from above; "
            "measure larger batch sizes."
        )
    if answers.b_noise.open_low:
        notes.append(
            f"The {level} interval of B_noise has no lower end (its draws reach the end of the "
            f"range the model searches, 1/{B_NOISE_RANGE:,.0f} of the smallest batch size "
            f"({fmt(min(sizes))})): the data do not bound B_noise from below; measure smaller "
            "batch sizes."
        )
    elif low <= min(sizes) / OPEN_FACTOR:
        notes.append(
            f"The {level} interval of B_noise reaches down to {fmt(low)}, under 1/"
            f"{OPEN_FACTOR:g} of the smallest batch size ({fmt(min(sizes))}): the data do not "
            "bound B_noise from below; measure smaller batch sizes."
        )
    return notes


OPEN_FACTOR = 10.0
"""An interval of B_noise reaching this factor past the measured batch sizes is called open."""


def fit_notes(rec: Recommendation, steps: pd.DataFrame, timed: pd.DataFrame) -> list[str]:
    """The recommendation's own notes, and why there is none."""
    notes = []
    if not rec.ok and np.isfinite(steps["steps_to_result"].to_numpy(dtype=float)).any():
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


def _trials_text(row: Mapping[str, Any]) -> str:
    """``"6 trials"`` or ``"6 trials, 2 diverged"``."""
    text = f"{int(row['trials'])} trial{'s' if int(row['trials']) != 1 else ''}"
    if int(row["diverged"]):
        text += f", {int(row['diverged'])} diverged"
    return text


def _listed(values: Any) -> str:
    """``"8, 16 and 32"``: numbers shown plainly, strings as they are (`join_words`)."""
    return join_words(values, last=" and ")
