"""Measurements read off the standard table: steps, examples and seconds to a result.

All functions are pure: they take the measurement table (flat or indexed by `index_table`) and
a `Target`, and return new DataFrames. Results are recomputed from the curves, so any target
can be asked after the fact: ``val_accuracy>=0.6`` and ``val_accuracy>=0.7`` give different
numbers from the same runs. A target never met counts as ``inf`` steps (Shallue et al. 2018).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.seeds import robust_steps
from study.analysis.table import (
    BATCH_SIZE,
    EXAMPLES,
    LEARNING_RATE,
    ORIGIN,
    REPLICAS,
    SEED,
    STATE,
    STEP,
    STRATEGY,
    STUDY,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
    flatten_table,
    hp_columns,
    metric_columns,
    validate_table,
)
from study.config.hold import Crossings
from study.config.target import Target

FELL_BACK = "fell_back"
"""The column of how many crossings of the target fell back before one held (the hold rule)."""

LR_TOLERANCE = 1.0001
"""Two learning rates within this factor of each other count as the same value."""

_OPS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_TRIAL_COLUMNS = (BATCH_SIZE, TRIAL, STEP, STATE, LEARNING_RATE, EXAMPLES, TRAIN_SECONDS)
_TRIAL_SETTINGS = (STRATEGY, REPLICAS, TUNER, LEARNING_RATE, STATE, SEED, ORIGIN)


def target_holds(values: pd.Series | np.ndarray, target: Target) -> np.ndarray:
    """Vectorised `Target.holds`: a boolean array, False wherever the value is NaN."""
    array = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        return np.asarray(_OPS[target.op](array, target.threshold), dtype=bool) & ~np.isnan(array)


def trial_key(df: pd.DataFrame) -> list[str]:
    """The columns naming one trial: ``[study, batch_size, trial]`` (``study`` when present)."""
    return [c for c in (STUDY, BATCH_SIZE, TRIAL) if c in df.columns]


def trial_steps_to_target(df: pd.DataFrame, target: Target) -> pd.DataFrame:
    """One row per trial: when (in steps, examples and seconds) it first met ``target``.

    ``steps_to_target`` is the first *evaluation* step from which the target held by its hold
    rule (``target.hold``, `study.config.hold`: through the window after it; ``Hold.OFF``: the
    first evaluation that met it), never interpolated; a crossing that fell back first does
    not count, nor one the curve ends before it held. ``examples_to_target`` and
    ``seconds_to_target`` are the ``examples`` and
    ``train_seconds`` of that same row. A trial that never met it (NaN metrics never do) gets
    ``inf`` in all three and ``reached=False``.

    ``state`` is the recorded state, except that ``reached``/``not_reached`` (which are relative
    to the target the study ran with) are re-derived from the curve for this target; other states
    (``diverged``, ``pruned``, ...) are kept even when the curve met the target before.

    Example: a curve evaluated at steps 0, 10, 20 with ``val_accuracy`` 0.1, 0.5, 0.7 and the
    target ``val_accuracy>=0.6`` gives ``steps_to_target == 20`` (not 15).

    Returns:
        Columns ``study`` (if present), ``batch_size``, ``trial``, ``strategy``, ``replicas``,
        ``tuner``, ``seed``, ``origin`` (those present), ``learning_rate``, ``state``, ``hp.*``,
        ``reached``, ``fell_back`` (crossings seen that did not hold),
        ``steps_to_target``, ``examples_to_target``, ``seconds_to_target``; sorted by trial key.
    """
    flat = flatten_table(df)
    validate_table(flat, _TRIAL_COLUMNS, metrics=(target.metric,))
    key = trial_key(flat)
    flat = flat.sort_values([*key, STEP], kind="stable")
    settings = [c for c in _TRIAL_SETTINGS if c in flat.columns] + hp_columns(flat)
    trials = flat.groupby(key, sort=True, dropna=False)[settings].first().reset_index()

    first = _held_rows(flat, key, target).rename(
        columns={
            STEP: "steps_to_target",
            EXAMPLES: "examples_to_target",
            TRAIN_SECONDS: "seconds_to_target",
        }
    )
    out = trials.merge(first, on=key, how="left")
    out[FELL_BACK] = out[FELL_BACK].fillna(0).astype(int) if FELL_BACK in out.columns else 0
    out["reached"] = out["steps_to_target"].notna()
    for column in ("steps_to_target", "examples_to_target", "seconds_to_target"):
        out[column] = out[column].astype(float).where(out["reached"], math.inf)
    recorded = out[STATE].astype(str)
    relative = recorded.isin(["reached", "not_reached"])
    out[STATE] = recorded.where(~relative, np.where(out["reached"], "reached", "not_reached"))
    return out


def _held_rows(flat: pd.DataFrame, key: list[str], target: Target) -> pd.DataFrame:
    """Each trial's evaluation where its crossing that held began (rows sorted by step), and
    ``fell_back``: how many crossings before it (or, unreached, at all) fell back."""
    columns = [*key, STEP, EXAMPLES, TRAIN_SECONDS]
    met = target_holds(flat[target.metric], target)
    if not target.hold.active:
        return flat.loc[met, columns].drop_duplicates(subset=key, keep="first")
    picks: list[int] = []
    fell: list[tuple[Any, ...]] = []
    steps = flat[STEP].to_numpy()
    for name, rows in flat.groupby(key, sort=False, dropna=False).indices.items():
        crossings = Crossings(target.hold)
        for row in rows:
            if crossings.observe(int(steps[row]), bool(met[row])) is not None:
                picks.append(int(rows[np.searchsorted(steps[rows], crossings.held)]))
                break
        if crossings.fell_back:
            fell.append((*(name if isinstance(name, tuple) else (name,)), len(crossings.fell_back)))
    held = flat.iloc[sorted(picks)][columns]
    counts = pd.DataFrame(fell, columns=[*key, FELL_BACK])
    return held.merge(counts, on=key, how="outer") if fell else held


def steps_to_result(
    df: pd.DataFrame, target: Target, by: Sequence[str] = (BATCH_SIZE,)
) -> pd.DataFrame:
    """Steps to result per batch size (or per ``by`` group): the best trial's first hit.

    Example: with ``by=("batch_size", "strategy")`` each (batch size, strategy) stratum gets its
    own row. See `summarize_trials` for the columns.
    """
    return summarize_trials(trial_steps_to_target(df, target), by=by)


def summarize_trials(trials: pd.DataFrame, by: Sequence[str] = (BATCH_SIZE,)) -> pd.DataFrame:
    """Aggregate the per-trial rows of `trial_steps_to_target` into one row per ``by`` group.

    Columns:
        ``steps_to_result``: min ``steps_to_target`` over the group's trials (``inf`` if none
        reached); with confirmation trials (a point run under several seeds, see
        `study.analysis.seeds`), the least median over seeds of such a point instead, and
        ``steps_low``/``steps_high`` its spread over its ``seeds`` (1, and the one value,
        without); ``examples_to_result``: the min examples (with confirmation, the median of the
        chosen point's); ``seconds_to_result``: the min wall-clock training time to the target
        over trials (the fastest trial in seconds need not be the one with fewest steps);
        ``best_trial`` and ``best_learning_rate``: the trial with fewest steps (ties go to the
        smaller learning rate, then the smaller trial number; with confirmation, the chosen
        point's trial at the study's seed; ``<NA>``/NaN if none reached); ``trials``, ``reached``,
        ``diverged``: counts; ``lr_min``, ``lr_max``: the searched learning-rate range;
        ``lr_on_edge``: the best learning rate equals ``lr_min`` or ``lr_max`` (within a factor
        of 1.0001) and at least 3 distinct rates were tried, so the range may be too narrow;
        ``lr_edge``: ``"low"``, ``"high"`` or ``""``.
    """
    by = list(by)
    validate_table(
        trials,
        [
            *by,
            TRIAL,
            LEARNING_RATE,
            STATE,
            "steps_to_target",
            "examples_to_target",
            "seconds_to_target",
        ],
    )
    trials = trials.assign(
        _reached=np.isfinite(trials["steps_to_target"].to_numpy(dtype=float)),
        _diverged=trials[STATE].astype(str) == "diverged",
    )
    grouped = trials.groupby(by, sort=True, dropna=False)
    out = grouped.agg(
        steps_to_result=("steps_to_target", "min"),
        examples_to_result=("examples_to_target", "min"),
        seconds_to_result=("seconds_to_target", "min"),
        trials=(TRIAL, "size"),
        reached=("_reached", "sum"),
        diverged=("_diverged", "sum"),
        lr_min=(LEARNING_RATE, "min"),
        lr_max=(LEARNING_RATE, "max"),
        lr_distinct=(LEARNING_RATE, _distinct_count),
    )
    ranked = trials.sort_values(
        [*by, "steps_to_target", LEARNING_RATE, TRIAL], kind="stable", na_position="last"
    )
    best = ranked.drop_duplicates(subset=by, keep="first").set_index(by)
    best_reached = best["_reached"].reindex(out.index)
    out["best_trial"] = best[TRIAL].reindex(out.index).astype("Int64").where(best_reached)
    out["best_learning_rate"] = (
        best[LEARNING_RATE].reindex(out.index).astype(float).where(best_reached)
    )
    _use_seed_estimates(out, trials, by)
    out["lr_edge"] = [
        _edge(lr, low, high, n)
        for lr, low, high, n in zip(
            out["best_learning_rate"], out["lr_min"], out["lr_max"], out["lr_distinct"]
        )
    ]
    out["lr_on_edge"] = out["lr_edge"] != ""
    out[["trials", "reached", "diverged"]] = out[["trials", "reached", "diverged"]].astype(int)
    columns = [
        "steps_to_result",
        "steps_low",
        "steps_high",
        "seeds",
        "examples_to_result",
        "seconds_to_result",
        "best_trial",
        "best_learning_rate",
        "trials",
        "reached",
        "diverged",
        "lr_min",
        "lr_max",
        "lr_on_edge",
        "lr_edge",
    ]
    return out[columns].reset_index()


def _use_seed_estimates(out: pd.DataFrame, trials: pd.DataFrame, by: list[str]) -> None:
    """Fill ``steps_low``, ``steps_high`` and ``seeds`` of each group in ``out`` (indexed by
    ``by``); where a point ran under several seeds, its median replaces the best single trial
    (`robust_steps`)."""
    steps = trials["steps_to_target"].to_numpy(dtype=float)
    estimates = robust_steps(trials, steps, by)
    out["steps_low"] = out["steps_to_result"].astype(float)
    out["steps_high"] = out["steps_to_result"].astype(float)
    out["seeds"] = 1
    for key, estimate in estimates.items():
        label = key if len(by) > 1 else key[0]
        if estimate.seeds < 2:
            continue
        row = trials.loc[estimate.index]
        reached = math.isfinite(estimate.steps)
        out.loc[label, ["steps_to_result", "steps_low", "steps_high"]] = [
            estimate.steps,
            estimate.low,
            estimate.high,
        ]
        out.loc[label, "seeds"] = estimate.seeds
        out.loc[label, "examples_to_result"] = estimate.steps * float(row[BATCH_SIZE])
        out.loc[label, "best_trial"] = row[TRIAL] if reached else pd.NA
        out.loc[label, "best_learning_rate"] = float(row[LEARNING_RATE]) if reached else np.nan


def call_and_step_seconds(steps: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """Fit ``seconds = a + b * steps`` over evaluation intervals (one compiled call each):
    ``a`` the fixed cost of a call, ``b`` the cost of a step, both >= 0.

    Short trials run a few steps per call, so their seconds per step carry the call's fixed cost;
    ``b`` is what a long run pays per step. With fewer than 3 intervals, or one interval length
    only, ``a`` is 0 and ``b`` the pooled seconds per step.

    Example: intervals of 1, 2 and 4 steps taking 1.5, 2.5 and 4.5 ms give a = 0.5 ms, b = 1 ms.
    """
    steps, seconds = np.asarray(steps, float), np.asarray(seconds, float)
    pooled = float(seconds.sum() / steps.sum()) if steps.sum() > 0 else math.nan
    if len(steps) < 3 or np.unique(steps).size < 2:
        return 0.0, pooled
    b, a = np.polyfit(steps, seconds, 1)
    if a < 0 or b <= 0:
        return 0.0, pooled
    return float(a), float(b)


def _intervals(flat: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Steps and training seconds between consecutive evaluations of each trial."""
    ordered = flat.sort_values([*key, STEP], kind="stable")
    grouped = ordered.groupby(key, sort=False)
    out = ordered.assign(
        interval_steps=grouped[STEP].diff().astype(float),
        interval_seconds=grouped[TRAIN_SECONDS].diff().astype(float),
    )
    ok = (out["interval_steps"] > 0) & (out["interval_seconds"] > 0)
    return out[ok & np.isfinite(out["interval_seconds"])]


def throughput_by_strategy(df: pd.DataFrame, target: Target | None = None) -> pd.DataFrame:
    """Training speed per (strategy, replicas, batch size) and, with a target, time to result.

    ``seconds_per_step`` is the cost of a step in a long run: the slope of training seconds
    against steps over every evaluation interval of the stratum's trials
    (`call_and_step_seconds`); ``call_seconds`` is the fixed cost of one compiled call, which
    short trials pay every few steps. ``steps_per_second`` and ``examples_per_second`` follow
    from ``seconds_per_step``; ``timed_trials`` counts the trials that trained.

    With ``target``, ``steps_to_result`` is taken per batch size, pooled over strategies (a
    synchronous strategy does the same arithmetic as one device), and ``time_to_result =
    steps_to_result * seconds_per_step``; ``measured_seconds_to_result`` is the fastest
    measured trial of that very stratum.

    Example: batch 512 on ``mirrored:2`` at 20 steps/s with 75 steps to result gives
    ``time_to_result == 3.75``.
    """
    flat = flatten_table(df)
    validate_table(flat, [STRATEGY, REPLICAS, BATCH_SIZE, TRIAL, STEP, EXAMPLES, TRAIN_SECONDS])
    key = trial_key(flat)
    stratum = [STRATEGY, REPLICAS, BATCH_SIZE]
    intervals = _intervals(flat, key)
    rows = []
    for values, group in intervals.groupby(stratum, sort=True):
        call, step = call_and_step_seconds(group["interval_steps"], group["interval_seconds"])
        batch = float(values[2])
        rows.append(
            {
                **dict(zip(stratum, values)),
                "steps_per_second": 1.0 / step,
                "examples_per_second": batch / step,
                "timed_trials": group[key].drop_duplicates().shape[0],
                "seconds_per_step": step,
                "call_seconds": call,
            }
        )
    columns = [*stratum, "steps_per_second", "examples_per_second", "timed_trials"]
    out = pd.DataFrame(rows, columns=[*columns, "seconds_per_step", "call_seconds"])
    if target is None:
        return out
    pooled = steps_to_result(flat, target).set_index(BATCH_SIZE)["steps_to_result"]
    out["steps_to_result"] = out[BATCH_SIZE].map(pooled).astype(float)
    out["time_to_result"] = out["steps_to_result"] * out["seconds_per_step"]
    own = steps_to_result(flat, target, by=stratum).set_index(stratum)["seconds_to_result"]
    out["measured_seconds_to_result"] = own.reindex(pd.MultiIndex.from_frame(out[stratum])).values
    return out


def strategy_table(df: pd.DataFrame, target: Target) -> pd.DataFrame:
    """The "seed experiments" table: per strategy and batch size, time to result and metrics.

    One row per (strategy, replicas, batch size): ``seconds_to_result`` (the fastest trial's
    training seconds to the target, ``inf`` if none reached), ``steps_to_result``,
    ``seconds_per_step`` (median, see `throughput_by_strategy`), ``best_trial`` and its
    ``learning_rate``, and every validation metric of that trial at its last evaluation. The best
    trial is the one fastest to the target in seconds; if none reached it, the one whose last
    ``target.metric`` is best.

    Example: ``strategy_table(df, Target.parse("val_accuracy>=0.6"))`` has a row
    ``("mirrored:2", 2, 512, 41.0, 75.0, ...)`` with that run's final ``val_loss`` and
    ``val_accuracy``.
    """
    flat = flatten_table(df)
    trials = trial_steps_to_target(flat, target)
    key = trial_key(flat)
    stratum = [STRATEGY, REPLICAS, BATCH_SIZE]
    metrics = metric_columns(flat)
    last = flat.sort_values([*key, STEP], kind="stable").drop_duplicates(subset=key, keep="last")
    last = last[[*key, *metrics]].rename(columns={m: f"_last_{m}" for m in metrics})
    trials = trials.merge(last, on=key, how="left")
    final = trials[f"_last_{target.metric}"].astype(float)
    trials["_rank_metric"] = -final if target.maximize else final
    ranked = trials.sort_values(
        [*stratum, "seconds_to_target", "_rank_metric", TRIAL], kind="stable", na_position="last"
    )
    best = ranked.drop_duplicates(subset=stratum, keep="first")
    out = best[stratum].copy()
    out["seconds_to_result"] = best["seconds_to_target"].to_numpy()
    out["steps_to_result"] = best["steps_to_target"].to_numpy()
    speed = throughput_by_strategy(flat).set_index(stratum)["seconds_per_step"]
    out["seconds_per_step"] = speed.reindex(pd.MultiIndex.from_frame(out[stratum])).values
    out["best_trial"] = best[TRIAL].to_numpy()
    out[LEARNING_RATE] = best[LEARNING_RATE].to_numpy()
    for metric in metrics:
        out[metric] = best[f"_last_{metric}"].to_numpy()
    return out.reset_index(drop=True)


def _distinct_count(values: pd.Series) -> int:
    """How many distinct positive values, counting those within `LR_TOLERANCE` as one."""
    array = np.sort(values.dropna().to_numpy(dtype=float))
    array = array[array > 0]
    if array.size == 0:
        return 0
    return 1 + int(np.sum(np.diff(np.log(array)) > math.log(LR_TOLERANCE)))


def _edge(lr: float, low: float, high: float, distinct: int) -> str:
    if distinct < 3 or not (lr > 0 and low > 0 and high > 0):
        return ""
    if abs(math.log(lr / low)) <= math.log(LR_TOLERANCE):
        return "low"
    if abs(math.log(lr / high)) <= math.log(LR_TOLERANCE):
        return "high"
    return ""
