"""Compute a scaling report from the measurement table: measures, fits, a recommendation, notes.

`build_report` only calls the pure analysis functions of `study.analysis` and collects their
results in the report's record, one frozen `ScalingReport` (`study.report.record`); the notes'
sentences come from `study.report.notes`, and writing it out is `study.report.write`. Thin data never raises: fits come back with
``ok=False`` and the report's ``notes`` say, in plain sentences, what is missing and why.

Example::

    report = build_report(ledger_table(storage, "quickstart"), Target.parse("val_accuracy>=0.5"),
                          study="quickstart", accelerators=None)
    report.answers.b_noise.text(), report.recommendation.batch_size, report.notes
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.answers import OVERHEAD, Answers, scaling_answers
from study.analysis.crossings import trial_crossings
from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES
from study.analysis.lr_scaling import LrPowerLawFit, fit_lr_power_law
from study.analysis.measures import strategy_table, summarize_trials, throughput_by_strategy
from study.analysis.model_free import model_free_readings
from study.analysis.model_views import (
    ModelCurve,
    model_curve,
    model_recommendation,
    model_regimes,
)
from study.analysis.noise_scale import fit_noise_scale_from_trials
from study.analysis.predicted_noise import compare, predict_noise_scale
from study.analysis.recommend import recommend
from study.analysis.regimes import Regimes, scaling_regimes
from study.analysis.seeds import seed_noise
from study.analysis.surrogate import censored_trials, fit_surrogate
from study.analysis.table import BATCH_SIZE, REPLICAS, STRATEGY, flatten_table, metric_columns
from study.analysis.threads import one_blas_thread
from study.analysis.time_model import extrapolate_replicas, probe_frame, time_to_result
from study.config.space import RangeParam
from study.config.target import Target
from study.ledger.summary import StudyState
from study.report.answer_prose import disagreement_notes, misfit_notes
from study.report.notes import (
    answer_notes,
    crossing_notes,
    data_notes,
    edge_notes,
    extrapolation_notes,
    fit_notes,
    knee_notes,
    seed_notes,
    thin_notes,
)
from study.report.record import CrossCheck, ScalingReport, StudyFacts

DEFAULT_ACCELERATORS = 8
"""Accelerators the recommendation is made for when none are given (or more if the study ran
on more replicas)."""


@one_blas_thread
def build_report(
    table: pd.DataFrame,
    target: Target,
    *,
    study: str,
    accelerators: int | None,
    confidence: float = CONFIDENCE,
    overhead: float = OVERHEAD,
    state: StudyState = "complete",
    command: str = "",
    context: Mapping[str, str] | None = None,
    facts: StudyFacts | None = None,
    pilot: Mapping[str, Any] | None = None,
    probe: Sequence[Mapping[str, Any]] | pd.DataFrame | None = None,
) -> ScalingReport:
    """Compute every measure, fit and note of a scaling report.

    Args:
        table: the measurement table (flat or indexed), e.g. from `ledger_table`.
        target: the validation target results are measured against.
        study: the study name (shown in the report).
        accelerators: recommend for this many devices; None means the study's largest replica
            count, at least `DEFAULT_ACCELERATORS`.
        confidence: the confidence of every interval (0.9 makes the report say "90% CI").
        overhead: the critical batch size's overhead over perfect scaling (0.2: 20%).
        state: the study's state (``complete``, ``running``, ``incomplete``, ``imported``).
        command: the command that made the report, for its "how it was made" section.
        context: further facts for that section, e.g. ``{"storage": "mlruns/optuna.journal"}``.
        facts: what the study trained and how it searched, for the top of the report (the
            study file, package versions); without them the report shows what the
            measurements hold.
        pilot: the study's pilot run in its stored form (``ledger.notes.pilot()``,
            `Pilot.to_stored`: its B_simple and interval), the first source of the predicted
            B_simple; without one the trials that measured it.
        probe: the throughput probe's rows in their stored form (``ledger.notes.throughput()``,
            `ThroughputRow.to_stored`), for the time-to-result model; its seconds per step
            also replace the trials' own timings in the recommendation's wall-time speed-up
            where both exist.

    Raises:
        ValueError: if ``accelerators < 1``, ``confidence`` is not strictly between 0 and 1,
            ``overhead`` is not positive, or the table lacks a fixed column.
    """
    if accelerators is not None and accelerators < 1:
        raise ValueError(f"accelerators must be >= 1 (got {accelerators})")
    if not overhead > 0:
        raise ValueError(f"overhead must be > 0, e.g. 0.2 for 20% (got {overhead})")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, e.g. 0.95 (got {confidence})")
    flat = flatten_table(table).reset_index(drop=True)
    metric_missing = target.metric not in flat.columns
    measured = flat.iloc[:0].assign(**{target.metric: np.nan}) if metric_missing else flat
    n_accelerators = accelerators or default_accelerators(flat)

    trials = trial_crossings(measured, target)
    steps = summarize_trials(trials)
    answers = scaling_answers(
        fit_surrogate(censored_trials(trials, measured)),
        accelerators=n_accelerators,
        confidence=confidence,
        overhead=overhead,
    )  # as `study_answers`, on the crossings computed once
    curve, regimes = model_curve(answers), model_regimes(answers)
    steps = _annotate(steps, curve, regimes)
    steps_by_strategy = summarize_trials(trials, by=(BATCH_SIZE, STRATEGY))
    throughput = throughput_by_strategy(measured, target)
    strategies = strategy_table(measured, target)
    timed = throughput[np.isfinite(throughput["seconds_per_step"].to_numpy(dtype=float))]
    probed = probe_frame(probe)
    timed = _probe_first(probed, timed)
    recommendation = model_recommendation(answers, steps, timed if not timed.empty else None)
    cross_check = _cross_check(trials, steps, timed, answers, confidence, overhead)

    predicted = predict_noise_scale(pilot, measured, target)
    extrapolated = extrapolate_replicas(probed, n_accelerators)
    time_model = time_to_result(probed, steps, curve, extrapolated=extrapolated)
    noise = seed_noise(trials)
    notes = [
        *data_notes(flat, target, trials, state, study, metric_missing),
        *answer_notes(answers, trials_planned=(facts or StudyFacts()).trials_planned),
        *crossing_notes(trials, target),
        *seed_notes(noise, trials),
        *thin_notes(steps, target),
        *edge_notes(steps, _lr_range(facts)),
        *extrapolation_notes(answers, steps),
        *knee_notes(answers),
        *fit_notes(recommendation, steps, timed),
        *misfit_notes(answers),
    ]
    return ScalingReport(
        study=study,
        target=target,
        state=state,
        accelerators=n_accelerators,
        trials=trials,
        steps=steps,
        steps_by_strategy=steps_by_strategy,
        answers=answers,
        noise_scale=curve,
        regimes=regimes,
        recommendation=recommendation,
        cross_check=cross_check,
        throughput=throughput,
        strategies=strategies,
        notes=tuple(dict.fromkeys(notes)),
        table=flat,
        confidence=confidence,
        command=command or f"study report {study} --target '{target}'",
        context=dict(context or {}),
        facts=facts or StudyFacts(),
        predicted_noise=predicted,
        seed_noise=noise,
        noise_agreement=compare(predicted, curve),
        time_model=time_model,
        created=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


def measured_metrics(flat: pd.DataFrame) -> list[str]:
    """The validation metrics of a measurement table (`metric_columns`; none without rows).

    Example: a table with ``val_accuracy`` and ``val_loss`` gives ``["val_accuracy",
    "val_loss"]``.
    """
    return [] if flat.empty else metric_columns(flat)


# ------------------------------------------------------------------------------------ pieces


def default_accelerators(flat: pd.DataFrame) -> int:
    """The accelerators answers are given for: the study's largest replica count, at least
    `DEFAULT_ACCELERATORS`."""
    if REPLICAS not in flat.columns or flat.empty:
        return DEFAULT_ACCELERATORS
    top = pd.to_numeric(flat[REPLICAS], errors="coerce").max()
    if pd.isna(top) or not math.isfinite(top):
        return DEFAULT_ACCELERATORS
    return max(DEFAULT_ACCELERATORS, int(top))


def _cross_check(
    trials: pd.DataFrame,
    steps: pd.DataFrame,
    timed: pd.DataFrame,
    answers: Answers,
    confidence: float,
    overhead: float,
) -> CrossCheck:
    """The best trial of each batch size read without the model (`CrossCheck`)."""
    fit = fit_noise_scale_from_trials(trials, confidence=confidence)
    regimes = scaling_regimes(steps)
    lr_fit, _ = _lr_fit(steps, confidence)
    rec = recommend(
        steps, fit, timed if not timed.empty else None, answers.accelerators, lr_fit=lr_fit
    )
    free = model_free_readings(steps, overhead=overhead, tolerance=answers.tolerance)
    check = CrossCheck(noise_scale=fit, regimes=regimes, lr_fit=lr_fit, recommendation=rec,
                       model_free=free)  # fmt: skip
    return dataclasses.replace(check, disagreements=tuple(disagreement_notes(answers, check)))


def _annotate(steps: pd.DataFrame, fit: ModelCurve, regimes: Regimes) -> pd.DataFrame:
    """Add ``regime`` (``not reached`` for infinite steps) and the model's S(B) and E(B)."""
    b = steps[BATCH_SIZE].to_numpy(dtype=float)
    finite = np.isfinite(steps["steps_to_result"].to_numpy(dtype=float))
    regime = [regimes.regime(x) if ok else "not reached" for x, ok in zip(b, finite)]
    nan = np.full(b.shape, np.nan)
    return steps.assign(
        regime=regime,
        fit_steps=fit.predict_steps(b) if fit.ok and b.size else nan,
        fit_examples=fit.predict_examples(b) if fit.ok and b.size else nan,
    )


def _lr_range(facts: StudyFacts | None) -> tuple[float, float] | None:
    """The learning-rate range the study file searched (None when unknown or not a range)."""
    config = facts.config if facts is not None else None
    if config is None or "learning_rate" not in config.space.param_names:
        return None
    param = config.space.param("learning_rate")
    if not isinstance(param, RangeParam):
        return None
    return float(param.low), float(param.high)


def _probe_first(probed: pd.DataFrame, timed: pd.DataFrame) -> pd.DataFrame:
    """The timings the recommendation uses: the probe's seconds per step, and the trials' own
    for any (strategy, replicas, batch size) the probe did not measure."""
    if probed.empty:
        return timed
    key = [STRATEGY, REPLICAS, BATCH_SIZE]
    rows = probed[[*key, "seconds_per_step"]].astype({REPLICAS: float, BATCH_SIZE: float})
    taken = set(map(tuple, rows[key].itertuples(index=False)))
    own = timed.astype({REPLICAS: float, BATCH_SIZE: float}) if len(timed) else timed
    rest = (
        own[[tuple(r) not in taken for r in own[key].itertuples(index=False)]] if len(own) else own
    )
    return pd.concat([rows, rest[[*key, "seconds_per_step"]]], ignore_index=True)


def _lr_fit(steps: pd.DataFrame, confidence: float) -> tuple[LrPowerLawFit, list[float]]:
    """Fit ``lr* = c B^alpha``, leaving out best rates on the range's edge while enough remain.

    Returns:
        The fit and the batch sizes left out (none when no best rate sits on an edge, or when
        leaving them out would leave fewer than `MIN_BATCH_SIZES`).
    """
    usable = steps[np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float))]
    on_edge = usable["lr_on_edge"].astype(bool)
    left_out: list[float] = []
    if on_edge.any() and usable.loc[~on_edge, BATCH_SIZE].nunique() >= MIN_BATCH_SIZES:
        left_out = list(usable.loc[on_edge, BATCH_SIZE])
        usable = usable[~on_edge]
    fit = fit_lr_power_law(usable[BATCH_SIZE], usable["best_learning_rate"], confidence=confidence)
    return fit, left_out
