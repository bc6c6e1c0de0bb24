"""The report's tables as text, shared by the HTML and Markdown writers.

A `Column` says which field of a row it shows, under which header, and how (`fmt`, at three
significant digits like every number of the report, or a function of the row); `report_tables` lays out every table of the report (per
batch size, per batch size and strategy, the seed experiments, throughput, and the fitted
numbers) as a `Table` of header and cell strings. The writers only add markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.predicted_noise import PILOT
from study.analysis.regimes import Regimes
from study.analysis.table import BATCH_SIZE
from study.report.answer_prose import MODEL, answer_rows, answer_span, no_answer_sentence
from study.report.cross_check_prose import INTRO as CROSS_CHECK_INTRO
from study.report.formatting import fmt, interval_text, percent, r_squared_text
from study.report.noise_prose import noise_sentences, predicted_source
from study.report.time_prose import time_sentences
from study.results import FINE, NOISE

if TYPE_CHECKING:  # pragma: no cover
    from study.report.record import ScalingReport


@dataclass(frozen=True)
class Column:
    """One column: the row field ``name`` shown under ``header`` as ``cell(row)``."""

    name: str
    header: str
    cell: Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class Table:
    """One table of the report, as text: ``text_columns`` are the indices of left-aligned
    (prose) columns; every other column holds numbers."""

    title: str
    intro: str
    headers: list[str]
    rows: list[list[str]]
    text_columns: tuple[int, ...]
    #: What the table says when it has no rows.
    empty: str = "No rows."


Row = tuple[str, str, str, str]
"""A row of the fitted-numbers table: (quantity, estimate, interval, comment)."""


def _col(name: str, header: str) -> Column:
    return Column(name, header, lambda row: fmt(row.get(name)))


def _range(row: Mapping[str, Any]) -> str:
    return f"{fmt(row.get('lr_min'))} to {fmt(row.get('lr_max'))}"


STEPS_COLUMNS = (
    _col(BATCH_SIZE, "batch size"),
    _col("steps_to_result", "steps to result"),
    _col("fit_steps", "model S(B)"),
    _col("examples_to_result", "examples to result"),
    _col("regime", "regime"),
    _col("best_learning_rate", "best learning rate"),
    Column("lr_range", "searched learning rates", _range),
    Column("lr_edge", "best lr on edge", lambda row: str(row.get("lr_edge") or "no")),
    _col("trials", "trials"),
    _col("reached", "reached"),
    _col("diverged", "diverged"),
    _col("seconds_to_result", "fastest seconds to result"),
)
BY_STRATEGY_COLUMNS = (
    _col(BATCH_SIZE, "batch size"),
    _col("strategy", "strategy"),
    _col("steps_to_result", "steps to result"),
    _col("seconds_to_result", "fastest seconds to result"),
    _col("best_learning_rate", "best learning rate"),
    _col("trials", "trials"),
    _col("reached", "reached"),
    _col("diverged", "diverged"),
)
THROUGHPUT_COLUMNS = (
    _col("strategy", "strategy"),
    _col("replicas", "replicas"),
    _col(BATCH_SIZE, "batch size"),
    _col("seconds_per_step", "seconds per step"),
    _col("examples_per_second", "examples per second"),
    _col("steps_to_result", "steps to result (pooled)"),
    _col("time_to_result", "time to result (s)"),
    _col("measured_seconds_to_result", "measured seconds to result"),
    _col("timed_trials", "timed trials"),
)
_STRATEGY_FIXED = (
    _col("strategy", "strategy"),
    _col("replicas", "replicas"),
    _col(BATCH_SIZE, "batch size"),
    _col("seconds_to_result", "seconds to result"),
    _col("steps_to_result", "steps to result"),
    _col("seconds_per_step", "seconds per step"),
    _col("best_trial", "trial"),
    _col("learning_rate", "learning rate"),
)


def _spread(row: Mapping[str, Any]) -> str:
    return f"{fmt(row.get('steps_low'))} to {fmt(row.get('steps_high'))}"


def steps_columns(steps: pd.DataFrame) -> list[Column]:
    """The per-batch-size columns; with confirmation trials (a point run under several seeds)
    also the spread of its steps over seeds and the number of seeds, after steps to result."""
    columns = list(STEPS_COLUMNS)
    if "seeds" in steps.columns and (pd.to_numeric(steps["seeds"], errors="coerce") > 1).any():
        columns[2:2] = [Column("spread", "spread over seeds", _spread), _col("seeds", "seeds")]
    return columns


def strategy_columns(strategies: pd.DataFrame) -> list[Column]:
    """The seed experiments' columns: the fixed ones, then ``final <metric>`` per validation
    metric (not the gradient-noise estimates ``noise/*`` or the ``fine`` evaluation mark)."""
    taken = {c.name for c in _STRATEGY_FIXED}
    metrics = [
        c
        for c in strategies.columns
        if c not in taken and not str(c).startswith(NOISE) and c != FINE
    ]
    return [*_STRATEGY_FIXED, *(_col(m, f"final {m}") for m in metrics)]


def report_tables(report: ScalingReport) -> list[Table]:
    """Every table of the report, in the order they are shown."""
    return [
        answers_table(report),
        _steps_table(report.steps),
        _table("Per batch size and strategy", report.steps_by_strategy, BY_STRATEGY_COLUMNS, (1,)),
        _table(
            "Strategies (seed experiments)",
            report.strategies,
            strategy_columns(report.strategies),
            (0,),
            intro="Per strategy and batch size: the trial fastest to the target in training "
            "seconds, and its validation metrics at its last evaluation.",
        ),
        _table("Throughput", report.throughput, THROUGHPUT_COLUMNS, (0,)),
        time_table(report),
        noise_table(report),
        Table(
            "Recommendation",
            f"For {report.accelerators} accelerators, from the model of every trial.",
            ["quantity", "estimate", f"{percent(report.confidence)} interval", "comment"],
            [list(r) for r in [*_recommendation_rows(report), *_time_rows(report)]],
            (0, 3),
        ),
        Table(
            "Cross-check: the best trial of each batch size",
            CROSS_CHECK_INTRO,
            ["quantity", "estimate", f"{percent(report.confidence)} interval", "comment"],
            [list(r) for r in cross_check_rows(report)],
            (0, 3),
        ),
    ]


def answers_table(report: ScalingReport) -> Table:
    """The answers of the model of every trial, each with its interval."""
    rows = [list(r) for r in answer_rows(report.answers, report.cross_check.model_free)]
    return Table(
        "The answers (one model of every trial)",
        f"From {MODEL}. Batch sizes and their intervals are read on the measured batch sizes; "
        "the comment gives the reading of the measured steps without a model, where they "
        "give one.",
        ["quantity", "estimate", f"{percent(report.confidence)} interval", "comment"],
        rows,
        (0, 3),
        no_answer_sentence(report.answers),
    )


def _seconds_spread(row: Mapping[str, Any]) -> str:
    return f"{fmt(row.get('seconds_low'))} to {fmt(row.get('seconds_high'))}"


def _time_range(row: Mapping[str, Any]) -> str:
    return f"{fmt(row.get('time_low'))} to {fmt(row.get('time_high'))}"


def _time_note(row: Mapping[str, Any]) -> str:
    if row.get("extrapolated"):
        return f"extrapolated from {row.get('basis')}: a lower bound"
    return "least wall time" if row.get("fastest") else ""


TIME_COLUMNS = (
    _col(BATCH_SIZE, "batch size"),
    _col("strategy", "strategy"),
    _col("replicas", "replicas"),
    _col("steps_to_result", "steps to result"),
    _col("steps_source", "steps from"),
    _col("seconds_per_step", "seconds per step (median)"),
    Column("seconds_spread", "spread over repeats", _seconds_spread),
    _col("time_to_result", "time to result (s)"),
    Column("time_range", "time range (s)", _time_range),
    Column("note", "note", _time_note),
)
"""The time-to-result table: one row per probed (batch size, strategy), fastest first."""


def time_table(report: ScalingReport) -> Table:
    """Time to result per (batch size, strategy) from the throughput probe; without a probe,
    no rows and the sentence that says how to make one."""
    model = report.time_model
    sentences = time_sentences(model)
    table = _table("Time to result (throughput probe)", model.table, TIME_COLUMNS, (1, 4, 9))
    if not model.ok:
        return Table(table.title, "", table.headers, [], table.text_columns, " ".join(sentences))
    intro = (
        "Steps to result at the batch size (the study's best trial; the model's S(B) where no "
        "trial measured it) times the probe's median seconds per step. " + " ".join(sentences)
    )
    return Table(table.title, intro, table.headers, table.rows, table.text_columns)


def noise_table(report: ScalingReport) -> Table:
    """The predicted B_simple next to the fitted B_noise, with both intervals (and, from
    trials, each batch size's estimate); without a prediction, no rows and how to get one."""
    predicted, fit = report.predicted_noise, report.noise_scale
    title = "Noise scale: predicted and fitted"
    headers = ["quantity", "estimate", "interval", "comment"]
    sentences = noise_sentences(report)
    if not predicted.ok:
        return Table(title, "", headers, [], (0, 3), " ".join(sentences))
    source = "pilot run" if predicted.source == PILOT else "trials"
    rows = [
        [
            f"B_simple (predicted, {source})",
            fmt(predicted.b_simple),
            interval_text(predicted.interval),
            predicted_source(predicted),
        ]
    ]
    if predicted.source != PILOT:
        for r in predicted.estimates.to_dict("records"):
            where = "target first met" if r["at_target"] else "last evaluation"
            rows.append(
                [
                    f"B_simple at batch size {fmt(r[BATCH_SIZE])}",
                    fmt(r["b_simple"]),
                    _pair(r["b_simple_low"], r["b_simple_high"]),
                    f"trial {fmt(r['trial'])} ({r['strategy']}), step {fmt(r['step'])}, {where}",
                ]
            )
    if fit.ok:
        rows.append(
            [
                "B_noise (model of every trial)",
                fmt(fit.b_noise),
                _model_span(report),
                f"{percent(fit.confidence)} interval",
            ]
        )
    else:
        rows.append(["B_noise (model of every trial)", "no answer", "", fit.reason])
    return Table(title, " ".join(sentences), headers, rows, (0, 3))


def _pair(low: Any, high: Any) -> str:
    values = pd.to_numeric(pd.Series([low, high]), errors="coerce")
    return "-" if values.isna().any() else interval_text((values[0], values[1]))


def _steps_table(steps: pd.DataFrame) -> Table:
    columns = steps_columns(steps)
    regime = next(i for i, c in enumerate(columns) if c.name == "regime")
    return _table("Per batch size (pooled over strategies)", steps, columns, (regime,))


def _table(
    title: str,
    df: pd.DataFrame,
    columns: Sequence[Column],
    text_columns: tuple[int, ...],
    *,
    intro: str = "",
) -> Table:
    records = df.to_dict("records") if len(df) else []
    rows = [[c.cell(r) for c in columns] for r in records]
    return Table(title, intro, [c.header for c in columns], rows, text_columns)


# ------------------------------------------------------------------------------ fitted numbers


def cross_check_rows(report: ScalingReport) -> list[Row]:
    """Rows of the cross-check table (the best trial of each batch size, read without the
    model): (quantity, estimate, interval at the report's confidence, comment)."""
    check = report.cross_check
    rec = check.recommendation
    rows = [
        *_noise_rows(check.noise_scale),
        *_regime_rows(check.regimes),
        *_lr_rows(check.lr_fit),
    ]
    if rec.ok:
        rows.append(
            (
                f"batch size for {rec.accelerators} accelerators",
                fmt(rec.batch_size),
                "",
                f"measured best rate {fmt(rec.learning_rate)}",
            )
        )
    return rows


def _time_rows(report: ScalingReport) -> list[Row]:
    best = report.time_model.best
    if not report.time_model.ok or best is None:
        return []
    return [
        (
            "least wall time to the target (throughput probe)",
            f"{fmt(best['time_to_result'])} s",
            "",
            f"batch size {fmt(best[BATCH_SIZE])} on {best['strategy']}, "
            f"{fmt(best['steps_to_result'])} steps ({best['steps_source']}) x "
            f"{fmt(best['seconds_per_step'])} s; range {_pair(best['time_low'], best['time_high'])}"
            " s over the repeats",
        )
    ]


def _noise_rows(fit: NoiseScaleFit) -> list[Row]:
    if not fit.ok:
        return [("noise-scale fit", "not fitted", "", fit.reason)]
    replicates = f"{fit.method} intervals"
    return [
        ("B_noise", fmt(fit.b_noise), interval_text(fit.b_noise_ci), ""),
        ("S_min (fewest steps, large batches)", fmt(fit.s_min), interval_text(fit.s_min_ci), ""),
        (
            "E_min (fewest examples, small batches)",
            fmt(fit.e_min),
            interval_text(fit.e_min_ci),
            "",
        ),
        ("fit residual (RMS of log steps)", fmt(fit.residual_rms), "", replicates),
    ]


def _regime_rows(regimes: Regimes) -> list[Row]:
    if not regimes.ok:
        return [("scaling regimes", "not determined", "", regimes.reason)]
    start = regimes.max_parallel_start
    return [
        ("perfect scaling up to batch size", fmt(regimes.perfect_end), "", ""),
        (
            "maximal data parallelism from batch size",
            fmt(start),
            "",
            "" if start is not None else "not within the measured range",
        ),
    ]


def _lr_rows(lr: LrPowerLawFit) -> list[Row]:
    if not lr.ok:
        return [("learning-rate power law", "not fitted", "", lr.reason)]
    return [
        (
            "alpha in lr* = c B^alpha",
            fmt(lr.alpha),
            interval_text(lr.alpha_ci),
            f"rule: {lr.rule}",
        ),
        ("c in lr* = c B^alpha", fmt(lr.c), "", f"R^2 {_r_squared(lr.r_squared)}"),
    ]


def _r_squared(r_squared: float) -> str:
    text = r_squared_text(r_squared)
    return text if text.startswith(">") else f"= {text}"


def _recommendation_rows(report: ScalingReport) -> list[Row]:
    rec = report.recommendation
    if not rec.ok:
        return [(f"recommendation ({rec.accelerators} accelerators)", "none", "", rec.reason)]
    measured_steps = (
        f"measured {fmt(rec.measured_step_speedup)}x ({fmt(rec.base_steps)} -> "
        f"{fmt(rec.steps)} steps from batch size {fmt(rec.base_batch_size)})"
    )
    time_basis = rec.time_source + (f", strategy {rec.strategy}" if rec.strategy else "")
    edge = ", on the range's edge" if rec.lr_on_edge else ""
    return [
        (
            f"recommended batch size ({rec.accelerators} accelerators)",
            fmt(rec.batch_size),
            "",
            f"{fmt(rec.per_device_batch)} per device, regime: {rec.regime}",
        ),
        ("recommended learning rate", fmt(rec.learning_rate), "", rec.lr_source + edge),
        (
            "expected speed-up in steps",
            f"{fmt(rec.step_speedup)}x",
            interval_text(rec.step_speedup_ci),
            measured_steps,
        ),
        (
            "expected speed-up in wall time",
            f"{fmt(rec.time_speedup)}x",
            interval_text(rec.time_speedup_ci),
            f"{time_basis}; with the measured steps {fmt(rec.measured_time_speedup)}x",
        ),
    ]


def _model_span(report: ScalingReport) -> str:
    """The model's B_noise interval as the answers table writes it (an open end in words)."""
    answers = report.answers
    if answers is not None and answers.ok:
        return answer_span(answers.b_noise)
    return interval_text(report.noise_scale.b_noise_ci)
