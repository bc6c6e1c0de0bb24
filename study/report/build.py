"""Assemble a scaling report from the measurement table: measures, fits, a recommendation, notes.

`build_report` only calls the pure analysis functions of `study.analysis` and collects their
results in one frozen `ScalingReport`; rendering lives in `study.report.render`. Thin data never
raises: fits come back with ``ok=False`` and the report's ``notes`` say, in plain sentences,
what is missing and why (a batch size that never reached the target, fewer than three batch
sizes, a study still running, a best learning rate on the edge of its range, a target metric
that was never measured).

Example::

    report = build_report(ledger_table(storage, "quickstart"), Target.parse("val_accuracy>=0.5"),
                          study="quickstart", accelerators=None)
    report.noise_scale.b_noise, report.recommendation.batch_size, report.notes
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.fits import (
    LrPowerLawFit,
    NoiseScaleFit,
    Recommendation,
    Regimes,
    fit_lr_power_law,
    fit_noise_scale_from_trials,
    recommend,
    scaling_regimes,
)
from study.analysis.measures import (
    strategy_table,
    summarize_trials,
    throughput_by_strategy,
    trial_steps_to_target,
)
from study.analysis.table import (
    BATCH_SIZE,
    REPLICAS,
    STATE,
    STRATEGY,
    flatten_table,
    metric_columns,
)
from study.config.target import Target

#: Accelerators the recommendation is made for when none are given (or more if the study ran
#: on more replicas).
DEFAULT_ACCELERATORS = 8
MIN_FIT_BATCH_SIZES = 3
SEARCH_FACTOR = 1e3
"""B_noise is searched within this factor of the measured batch sizes (as in `fit_noise_scale`)."""
_NOT_METRICS = ("stratum_trial",)
"""Numeric ledger columns that are not validation metrics (`ledger_table` adds them)."""


@dataclass(frozen=True)
class ScalingReport:
    """Everything a scaling report shows, computed once.

    Tables (DataFrames): ``trials`` (one row per trial, `trial_steps_to_target`); ``steps``
    (one row per batch size, pooled over strategies, `summarize_trials` plus ``regime``,
    ``fit_steps`` and ``fit_examples``: the noise-scale fit's prediction); ``steps_by_strategy``
    (one row per batch size and strategy); ``throughput`` (`throughput_by_strategy` with the
    target); ``strategies`` (`strategy_table`: the seed experiments' table); ``table`` (the
    measurement table itself).

    Fits: ``noise_scale``, ``regimes``, ``lr_fit`` and the ``recommendation`` for
    ``accelerators`` devices. ``notes``: plain sentences about thin data. ``state``: the study's
    state when the report was made (``complete``, ``running``, ``incomplete``, ``imported``).
    ``command`` and ``context`` say how the report was made.
    """

    study: str
    target: Target
    state: str
    accelerators: int
    trials: pd.DataFrame = field(repr=False, compare=False)
    steps: pd.DataFrame = field(repr=False, compare=False)
    steps_by_strategy: pd.DataFrame = field(repr=False, compare=False)
    noise_scale: NoiseScaleFit = field(repr=False)
    regimes: Regimes = field(repr=False)
    lr_fit: LrPowerLawFit = field(repr=False)
    throughput: pd.DataFrame = field(repr=False, compare=False)
    strategies: pd.DataFrame = field(repr=False, compare=False)
    recommendation: Recommendation = field(repr=False)
    notes: tuple[str, ...] = ()
    table: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)
    n_boot: int = 0
    seed: int = 0
    command: str = ""
    context: Mapping[str, str] = field(default_factory=dict, compare=False)
    created: str = ""

    @property
    def metrics(self) -> list[str]:
        """The validation metrics measured (numeric columns other than the fixed ones)."""
        return measured_metrics(self.table)


def build_report(
    table: pd.DataFrame,
    target: Target,
    *,
    study: str,
    accelerators: int | None,
    n_boot: int = 1000,
    seed: int = 0,
    state: str = "complete",
    command: str = "",
    context: Mapping[str, str] | None = None,
) -> ScalingReport:
    """Compute every measure, fit and note of a scaling report.

    Args:
        table: the measurement table (flat or indexed), e.g. from `ledger_table`.
        target: the validation target results are measured against.
        study: the study name (shown in the report).
        accelerators: recommend for this many devices; None means the study's largest replica
            count, at least `DEFAULT_ACCELERATORS`.
        n_boot: bootstrap replicates of the noise-scale fit (resampling trials per batch size).
        seed: seed of the bootstrap.
        state: the study's state (``complete``, ``running``, ``incomplete``, ``imported``).
        command: the command that made the report, for its "how it was made" section.
        context: further facts for that section, e.g. ``{"storage": "mlruns/optuna.journal"}``.

    Raises:
        ValueError: if ``accelerators < 1`` or ``n_boot < 0``, or the table lacks a fixed column.
    """
    if accelerators is not None and accelerators < 1:
        raise ValueError(f"accelerators must be >= 1 (got {accelerators})")
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0 (got {n_boot})")
    flat = flatten_table(table).reset_index(drop=True)
    metric_missing = target.metric not in flat.columns
    measured = flat.iloc[:0].assign(**{target.metric: np.nan}) if metric_missing else flat
    n_accelerators = accelerators or _default_accelerators(flat)

    trials = trial_steps_to_target(measured, target)
    fit = fit_noise_scale_from_trials(trials, n_boot=n_boot, seed=seed)
    steps = summarize_trials(trials)
    regimes = scaling_regimes(steps)
    steps = _annotate(steps, fit, regimes)
    steps_by_strategy = summarize_trials(trials, by=(BATCH_SIZE, STRATEGY))
    lr_fit, lr_notes = _lr_fit(steps)
    throughput = throughput_by_strategy(measured, target)
    strategies = strategy_table(measured, target).drop(columns=list(_NOT_METRICS), errors="ignore")
    timed = throughput[np.isfinite(throughput["seconds_per_step"].to_numpy(dtype=float))]
    recommendation = recommend(
        steps, fit, timed if not timed.empty else None, n_accelerators, lr_fit=lr_fit
    )

    notes = [
        *_data_notes(flat, target, trials, state, study, metric_missing),
        *_thin_notes(steps, target),
        *_edge_notes(steps),
        *lr_notes,
        *_fit_notes(fit, lr_fit, recommendation, steps, timed),
    ]
    return ScalingReport(
        study=study,
        target=target,
        state=state,
        accelerators=n_accelerators,
        trials=trials,
        steps=steps,
        steps_by_strategy=steps_by_strategy,
        noise_scale=fit,
        regimes=regimes,
        lr_fit=lr_fit,
        throughput=throughput,
        strategies=strategies,
        recommendation=recommendation,
        notes=tuple(dict.fromkeys(notes)),
        table=flat,
        n_boot=n_boot,
        seed=seed,
        command=command or f"study report {study} --target '{target}'",
        context=dict(context or {}),
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


# ------------------------------------------------------------------------------------ pieces


def _default_accelerators(flat: pd.DataFrame) -> int:
    if REPLICAS not in flat.columns or flat.empty:
        return DEFAULT_ACCELERATORS
    top = pd.to_numeric(flat[REPLICAS], errors="coerce").max()
    if pd.isna(top) or not math.isfinite(top):
        return DEFAULT_ACCELERATORS
    return max(DEFAULT_ACCELERATORS, int(top))


def _annotate(steps: pd.DataFrame, fit: NoiseScaleFit, regimes: Regimes) -> pd.DataFrame:
    """Add ``regime`` (``not reached`` for infinite steps) and the fit's predictions."""
    b = steps[BATCH_SIZE].to_numpy(dtype=float)
    finite = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float))
    regime = [regimes.regime(x) if ok else "not reached" for x, ok in zip(b, finite)]
    nan = np.full(b.shape, np.nan)
    return steps.assign(
        regime=regime,
        fit_steps=fit.predict_steps(b) if fit.ok and b.size else nan,
        fit_examples=fit.predict_examples(b) if fit.ok and b.size else nan,
    )


def _lr_fit(steps: pd.DataFrame) -> tuple[LrPowerLawFit, list[str]]:
    """Fit ``lr* = c B^alpha``, leaving out best rates on the range's edge while 3 remain."""
    usable = steps[np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float))]
    inner = usable[~usable["lr_on_edge"].astype(bool)]
    notes = []
    if len(inner) < len(usable) and inner[BATCH_SIZE].nunique() >= MIN_FIT_BATCH_SIZES:
        left_out = _join(usable.loc[usable["lr_on_edge"].astype(bool), BATCH_SIZE])
        notes.append(
            f"The learning-rate power law leaves out batch size(s) {left_out}, whose best rate "
            "sits on the edge of the searched range and so only bounds the true optimum."
        )
        usable = inner
    return fit_lr_power_law(usable[BATCH_SIZE], usable["best_learning_rate"]), notes


def _data_notes(
    flat: pd.DataFrame,
    target: Target,
    trials: pd.DataFrame,
    state: str,
    study: str,
    metric_missing: bool,
) -> list[str]:
    notes = []
    if flat.empty:
        notes.append(f"The study {study} has no measurements yet: no trial has been recorded.")
    elif metric_missing:
        have = ", ".join(measured_metrics(flat)) or "none"
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


def _thin_notes(steps: pd.DataFrame, target: Target) -> list[str]:
    notes = []
    finite = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float))
    never = steps.loc[~finite]
    if not never.empty:
        parts = [f"{_number(r[BATCH_SIZE])} ({_trials_text(r)})" for r in never.to_dict("records")]
        word = "Batch size" if len(parts) == 1 else "Batch sizes"
        notes.append(
            f"{word} {_join(parts)} never reached the target {target}; a target never met "
            "counts as infinitely many steps, and such batch sizes are left out of the fits."
        )
    reached = steps.loc[finite, BATCH_SIZE]
    if len(steps) and reached.nunique() < MIN_FIT_BATCH_SIZES:
        which = f" ({_join(reached)})" if len(reached) else ""
        notes.append(
            f"Only {reached.nunique()} batch size(s){which} reached the target, and the "
            "noise-scale fit S(B) = S_min (1 + B_noise/B) has two parameters and needs at "
            f"least {MIN_FIT_BATCH_SIZES} batch sizes to say anything about its shape: there is "
            "no B_noise, no learning-rate power law and no recommendation. Measure more batch "
            "sizes (or relax the target)."
        )
    return notes


def _edge_notes(steps: pd.DataFrame) -> list[str]:
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


def _fit_notes(
    fit: NoiseScaleFit,
    lr_fit: LrPowerLawFit,
    rec: Recommendation,
    steps: pd.DataFrame,
    timed: pd.DataFrame,
) -> list[str]:
    thin = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float)).sum() < 3
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
                f"The best learning rates lie almost exactly on a power law (R^2 = "
                f"{lr_fit.r_squared:.4f}), hence the narrow interval for alpha. If the winning "
                "trials were proposed by extrapolating from other batch sizes (Optuna's "
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
    """Say so when the bootstrap interval of B_noise runs into the fit's search bounds."""
    if fit.b_noise_ci is None or not fit.batch_sizes:
        return []
    low, high = fit.b_noise_ci
    smallest, largest = min(fit.batch_sizes), max(fit.batch_sizes)
    notes = []
    if high >= 0.99 * largest * SEARCH_FACTOR:
        notes.append(
            f"The 95% interval of B_noise reaches the upper end of the searched range "
            f"({fmt(largest * SEARCH_FACTOR)}, {SEARCH_FACTOR:g} x the largest batch size): the "
            "data do not bound B_noise from above; measure larger batch sizes."
        )
    if low <= 1.01 * smallest / SEARCH_FACTOR:
        notes.append(
            f"The 95% interval of B_noise reaches the lower end of the searched range "
            f"({fmt(smallest / SEARCH_FACTOR)}): the data do not bound B_noise from below; "
            "measure smaller batch sizes."
        )
    return notes


# ------------------------------------------------------------------------------------ summary


def answer(report: ScalingReport) -> str:
    """The question the study answers, answered in one paragraph of plain sentences."""
    return " ".join(_answer_sentences(report))


def _answer_sentences(report: ScalingReport) -> list[str]:
    steps, target = report.steps, report.target
    out = [
        f"How many training steps does it take to reach {target} as the global batch size "
        f"grows, and which batch size should {report.accelerators} accelerators use?"
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
            f"The fitted critical batch size is B_noise = {fmt(fit.b_noise)}{ci_text(fit.b_noise_ci)}"
            f", with S_min = {fmt(fit.s_min)} steps and E_min = {fmt(fit.e_min)} examples: at "
            "B_noise a run needs twice the minimum steps and twice the minimum examples."
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
        rule = {
            "linear": "consistent with the linear scaling rule (alpha = 1)",
            "square-root": "consistent with the square-root rule (alpha = 0.5)",
            "both": "too uncertain to tell the linear from the square-root rule",
            "neither": "consistent with neither the linear nor the square-root rule",
        }[lr.rule]
        out.append(
            f"The best learning rate grows as B^{fmt(lr.alpha, 2)}{ci_text(lr.alpha_ci, 2)}, {rule}."
        )
    rec = report.recommendation
    if rec.ok:
        text = (
            f"For {rec.accelerators} accelerators, use a global batch size of "
            f"{fmt(rec.batch_size)} ({fmt(rec.per_device_batch)} per device) with learning rate "
            f"{fmt(rec.learning_rate)} ({rec.lr_source}): expected speed-up "
            f"{fmt(rec.step_speedup)}x in steps{ci_text(rec.step_speedup_ci)} and "
            f"{fmt(rec.time_speedup)}x in wall time"
            f" ({'measured throughput' if rec.time_source == 'throughput' else 'ideal hardware'}"
            f"{', ' + rec.strategy if rec.strategy else ''}) over batch size "
            f"{fmt(rec.base_batch_size)} on one accelerator."
        )
        out.append(text)
    else:
        out.append(f"No recommendation for {rec.accelerators} accelerators: {rec.reason}.")
    return out


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
                f"b{_number(b)}={fmt(s)}"
                for b, s in zip(steps[BATCH_SIZE], steps["steps_to_result"])
            )
        )
    fit, regimes = report.noise_scale, report.regimes
    if fit.ok:
        line = f"B_noise = {fmt(fit.b_noise)}{ci_text(fit.b_noise_ci)}, S_min = {fmt(fit.s_min)}"
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


# ------------------------------------------------------------------------------- formatting


def fmt(value: Any, digits: int = 3) -> str:
    """A readable number: ``digits`` significant digits (whole numbers kept whole), thousands
    separated from 10,000 on, an exponent only below 1e-4 or from 1e12 on.

    Example: ``fmt(1170.0) == "1170"``, ``fmt(20992) == "20,992"``, ``fmt(0.01724) == "0.0172"``,
    ``fmt(math.inf) == "inf"``, ``fmt(None) == "-"``.
    """
    if value is None or value is pd.NA:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x != 0 and (abs(x) < 1e-4 or abs(x) >= 1e12):
        return f"{x:.{digits - 1}e}"
    if x.is_integer() or abs(x) >= 10 ** (digits - 1):
        return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.0f}"
    return f"{x:.{digits}g}"


def ci_text(ci: Sequence[float] | None, digits: int = 3) -> str:
    """`` (95% CI low-high)`` or ``""`` without an interval."""
    if ci is None:
        return ""
    return f" (95% CI {fmt(ci[0], digits)} to {fmt(ci[1], digits)})"


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _trials_text(row: Mapping[str, Any]) -> str:
    text = f"{int(row['trials'])} trial{'s' if int(row['trials']) != 1 else ''}"
    if int(row["diverged"]):
        text += f", {int(row['diverged'])} diverged"
    return text


def _join(values: Any) -> str:
    items = [v if isinstance(v, str) else str(_number(v)) for v in values]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def measured_metrics(flat: pd.DataFrame) -> list[str]:
    """The validation metrics of a measurement table (`metric_columns` without ledger extras)."""
    if flat.empty:
        return []
    return [m for m in metric_columns(flat) if m not in _NOT_METRICS]


def _number(value: Any) -> int | float:
    x = float(value)
    return int(x) if x.is_integer() else x
