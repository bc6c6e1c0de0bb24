"""The critical batch size over training, CBS(t), read off branch trials (pure pandas/numpy).

At each checkpoint of a reference run at ``B0``, branches at ``k x B0`` (and replicates at
``B0`` itself) trained the same window of examples. The rule (Merrill et al. 2025):

- the ``B0`` branch's mean validation loss ``L0`` (and target metric ``M0``) is the yardstick;
- a batch size ``B`` is *as good* when its mean loss is at most ``(1 + tol.loss) x L0`` and its
  mean metric no more than ``tol.metric`` worse than ``M0``;
- CBS is the largest batch size up to which every batch size is as good, interpolated in
  ``log B`` between the last one that is and the first one that is not (where the margin to
  the tolerance crosses zero); when every batch size tried is, CBS is at least the largest
  (``censored``).

The interval comes from the branch-to-branch noise: replicates (same checkpoint, batch size
and rate, another example order, the same order at every batch size) give per-replicate
differences to the ``B0`` branch, whose spread pooled over the checkpoint's batch sizes is the
standard error of each mean difference; the low end is the same rule on the difference plus
``t`` standard errors (batch sizes surely as good), the high end on the difference minus ``t``
standard errors (plausibly as good). With a per-branch rate search, each replicate's best
rate counts.

Example::

    table = cbs_curve(branches, references, tolerance=0.02)
    table[["examples", "cbs", "cbs_low", "cbs_high", "b_simple"]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.threads import one_blas_thread
from study.config.schedule import BatchSchedule, schedule_under
from study.ext.branch.section import Basis

__all__ = [
    "BRANCH_COLUMNS",
    "CbsCost",
    "cbs_at",
    "cbs_cost",
    "cbs_curve",
    "cbs_schedule",
    "cbs_trend",
    "reference_progress",
]

#: The columns a branch table holds (one row per branch trial).
BRANCH_COLUMNS = (
    "checkpoint", "examples", "batch_size", "replicate", "lr_factor", "learning_rate",
    "val_loss", "metric", "steps",
)  # fmt: skip


def cbs_at(
    rows: pd.DataFrame,
    b0: int,
    *,
    tolerance: float,
    metric_tolerance: float | None = None,
    higher_is_better: bool = True,
    confidence: float = 0.9,
    start_loss: float | None = None,
    progress: float | None = None,
) -> dict[str, Any]:
    """CBS at one checkpoint from its branches (`BRANCH_COLUMNS`; ``metric`` may be NaN).

    With ``start_loss`` (the checkpoint's own validation loss) the loss tolerance is a
    fraction of the ``B0`` branch's progress over the window (``progress`` basis: batch ``B``
    is as good when ``L_B - L0 <= tolerance x (start_loss - L0)``); without it, of ``L0``
    itself (``loss`` basis). Under S(B) = S_min (1 + B_noise / B) a window's progress at
    ``B`` is about ``1 / (1 + B / B_noise)`` of the small-batch one, so a progress tolerance
    of 0.5 puts CBS near B_noise, and 0.2 near the 20%-overhead point 0.25 B_noise.
    ``progress`` (the reference run's own progress over the window, `reference_progress`)
    replaces ``start_loss - L0`` as that share's base: it is read off many evaluations of the
    reference, where two single evaluations of a small batch's jittering iterate can differ
    by more than a late window's progress.

    Returns ``cbs``, ``cbs_low``, ``cbs_high``, ``censored`` (every batch size as good),
    ``baseline_loss``, ``noise_sd`` (relative loss, pooled over replicates), ``branches`` and per
    batch size the relative ``excess`` of its mean loss (``excess`` mapping).
    """
    best = _best_rate(rows)
    base = best[best["batch_size"] == b0]
    if base.empty:
        raise ValueError(f"no branch at the reference batch size {b0}")
    l0 = float(base["val_loss"].mean())
    m0 = float(base["metric"].mean()) if "metric" in base else math.nan
    sign = 1.0 if higher_is_better else -1.0
    scale = l0 if start_loss is None else float(start_loss) - l0
    if progress is not None and math.isfinite(progress):
        scale = float(progress)
    if not scale > 0:  # the B0 branch made no progress: nothing to be within a share of
        nan = math.nan
        return {"cbs": nan, "cbs_low": nan, "cbs_high": nan, "censored": False,
                "baseline_loss": l0, "baseline_metric": m0, "noise_sd": nan,
                "branches": len(rows), "excess": {}}  # fmt: skip
    best = best.assign(rel=(best["val_loss"] - l0) / scale, short=sign * (m0 - best["metric"]))
    cells = _differences(best, b0)
    z_or_t = _quantile(confidence, cells["df"])
    sizes, margins = [], {"mid": [], "low": [], "high": []}
    excess = {}
    for batch, e, d, se_e, se_d in cells["rows"]:
        excess[batch] = e
        sizes.append(batch)
        for name, shift in (("mid", 0.0), ("low", z_or_t), ("high", -z_or_t)):
            margins[name].append(
                _margin(e + shift * se_e, d + shift * se_d, tolerance, metric_tolerance)
            )
    sd_loss = cells["sd"]
    cbs, censored = _largest(sizes, margins["mid"])
    low, _ = _largest(sizes, margins["low"])
    high, high_censored = _largest(sizes, margins["high"])
    return {
        "cbs": cbs,
        "cbs_low": min(low, cbs),
        "cbs_high": math.inf if high_censored else max(high, cbs),
        "censored": censored,
        "baseline_loss": l0,
        "baseline_metric": m0,
        "noise_sd": sd_loss,
        "branches": len(rows),
        "excess": excess,
    }


@one_blas_thread
def cbs_curve(
    branches: pd.DataFrame,
    references: pd.DataFrame,
    *,
    b0: int,
    tolerance: float,
    metric_tolerance: float | None = None,
    higher_is_better: bool = True,
    confidence: float = 0.9,
    basis: Basis = "loss",
) -> pd.DataFrame:
    """CBS(t): one row per checkpoint (``checkpoint``, ``examples``, ``cbs``, ``cbs_low``,
    ``cbs_high``, ``censored``, ``baseline_loss``, ``noise_sd``, ``branches``) joined with the
    reference run's ``b_simple`` (and its interval) at that checkpoint when ``references``
    has them (its rows: ``checkpoint``, ``examples``, ``b_simple``, ...); ``basis``
    ``progress`` reads the loss tolerance as a share of the B0 branch's progress from the
    checkpoint's ``val_loss`` in ``references``, or of the references' ``progress`` column
    (`reference_progress`, shown as ``reference_progress``) where it has one (see `cbs_at`)."""
    if basis not in ("loss", "progress"):
        raise ValueError(f"basis must be loss or progress (got {basis!r})")
    start, gain = {}, {}
    if basis == "progress":
        start = dict(zip(references["checkpoint"], references["val_loss"], strict=True))
        if "progress" in references.columns:
            gain = dict(zip(references["checkpoint"], references["progress"], strict=True))
    rows = []
    for checkpoint, cell in branches.groupby("checkpoint"):
        found = cbs_at(
            cell,
            b0,
            tolerance=tolerance,
            metric_tolerance=metric_tolerance,
            higher_is_better=higher_is_better,
            confidence=confidence,
            start_loss=start.get(checkpoint) if basis == "progress" else None,
            progress=gain.get(checkpoint),
        )
        found.pop("excess")
        rows.append({"checkpoint": int(checkpoint), **found})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    names = ("checkpoint", "examples", "step", "b_simple", "b_simple_low", "b_simple_high")
    keep = [c for c in (*names, "val_loss", "progress") if c in references.columns]
    refs = references[keep].rename(
        columns={"val_loss": "checkpoint_loss", "progress": "reference_progress"}
    )
    table = table.merge(refs, on="checkpoint", how="left")
    first = ["checkpoint", "examples"]
    return table[first + [c for c in table.columns if c not in first]].sort_values("examples")


#: `reference_progress` fits the reference's evaluations within this factor of examples around
#: a window (widened by it until `PROGRESS_POINTS` evaluations lie inside).
PROGRESS_SPAN = 1.25
PROGRESS_POINTS = 5


def reference_progress(
    curve: pd.DataFrame, checkpoints: Sequence[int], window: int, column: str = "val_loss"
) -> list[float]:
    """The reference run's progress in ``column`` over ``window`` examples from each checkpoint
    (examples seen): the slope of a straight line fitted to its evaluations against log
    examples around ``[t, t + window]``, times ``log((t + window) / t)``. A line through many
    evaluations reads the trend; the difference of two evaluations reads as much jitter (NaN
    where fewer than 3 evaluations lie near)."""
    rows = curve[["examples", column]].astype(float)
    rows = rows[(rows["examples"] > 0) & np.isfinite(rows[column])]
    x_all = np.log(rows["examples"].to_numpy())
    y_all = rows[column].to_numpy()
    out = []
    for t in checkpoints:
        t = float(t)
        low, high = math.log(t), math.log(t + window)
        span = math.log(PROGRESS_SPAN)
        inside = np.zeros(len(x_all), dtype=bool)
        for _ in range(8):
            inside = (x_all >= low - span) & (x_all <= high + span)
            if inside.sum() >= PROGRESS_POINTS:
                break
            span *= 2
        if inside.sum() < 3:
            out.append(math.nan)
            continue
        slope = float(np.polyfit(x_all[inside], y_all[inside], 1)[0])
        out.append(-slope * (high - low))
    return out


@dataclass(frozen=True)
class CbsTrend:
    """Whether CBS(t) rises over training within its intervals: ``rises`` when the last
    checkpoint's low end lies above the first's high end, ``no_drop`` when no later checkpoint's
    interval lies wholly below an earlier one's; ``factor`` is last / first."""

    rises: bool
    no_drop: bool
    factor: float


def cbs_trend(curve: pd.DataFrame) -> CbsTrend:
    """The trend of a `cbs_curve` table (rows in order of examples) over the checkpoints that
    have a CBS (one where the reference made no progress has none and is left out)."""
    known = curve[np.isfinite(curve["cbs"].to_numpy(float))]
    if known.empty:
        return CbsTrend(False, True, math.nan)
    low = known["cbs_low"].to_numpy(float)
    high = known["cbs_high"].to_numpy(float)
    mid = known["cbs"].to_numpy(float)
    no_drop = all(high[j] >= low[i] for i in range(len(mid)) for j in range(i + 1, len(mid)))
    return CbsTrend(bool(low[-1] > high[0]), bool(no_drop), float(mid[-1] / mid[0]))


def cbs_schedule(
    curve: pd.DataFrame,
    *,
    b0: int,
    grid: Sequence[int],
    learning_rate: float,
    alpha: float,
    column: str = "cbs",
) -> BatchSchedule:
    """A batch-size schedule from CBS(t) (`schedule_under` its ``column``: ``cbs``, or
    ``cbs_low`` to be safe): from each checkpoint's examples on, the largest batch size of
    ``grid`` not above its CBS, never below ``B0`` and never falling (a running maximum);
    ``B0`` before the first checkpoint; the rate ``learning_rate x (B / B0) ** alpha``."""
    limits = zip(curve["examples"], curve[column], strict=True)
    return schedule_under(limits, b0=b0, grid=grid, learning_rate=learning_rate, alpha=alpha)


@dataclass(frozen=True)
class CbsCost:
    """What CBS(t) cost in training, against the study's own trials and against runs of the
    reference batch size to the target (``reference_runs``: total examples over the examples
    one reference run took to the target; None when it never got there)."""

    branch_steps: int
    branch_examples: int
    reference_steps: int
    reference_examples: int
    study_steps: int
    study_examples: int
    reference_examples_to_target: int | None

    @property
    def steps(self) -> int:
        return self.branch_steps + self.reference_steps

    @property
    def examples(self) -> int:
        return self.branch_examples + self.reference_examples

    @property
    def reference_runs(self) -> float | None:
        to_target = self.reference_examples_to_target
        return self.examples / to_target if to_target else None

    @property
    def of_study(self) -> float | None:
        """Examples of CBS(t) over the study's (None when the study trained nothing)."""
        return self.examples / self.study_examples if self.study_examples else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "branch_steps": self.branch_steps,
            "branch_examples": self.branch_examples,
            "reference_steps": self.reference_steps,
            "reference_examples": self.reference_examples,
            "steps": self.steps,
            "examples": self.examples,
            "study_steps": self.study_steps,
            "study_examples": self.study_examples,
            "reference_examples_to_target": self.reference_examples_to_target,
            "reference_runs": self.reference_runs,
            "of_study": self.of_study,
        }


def cbs_cost(
    branches: pd.DataFrame,
    reference: Mapping[str, Any],
    study_trials: pd.DataFrame | None = None,
) -> CbsCost:
    """The cost of CBS(t): the branches' steps and examples (``steps`` x ``batch_size``), the
    reference's (``reference``: ``steps``, ``examples``, ``examples_to_target``), and the study's
    trials' (``study_trials``: ``steps_run`` and ``examples_run`` columns)."""
    steps = branches["steps"].astype(int)
    study_steps = study_examples = 0
    if study_trials is not None and not study_trials.empty:
        study_steps = int(study_trials["steps_run"].fillna(0).sum())
        study_examples = int(study_trials["examples_run"].fillna(0).sum())
    to_target = reference.get("examples_to_target")
    return CbsCost(
        branch_steps=int(steps.sum()),
        branch_examples=int((steps * branches["batch_size"].astype(int)).sum()),
        reference_steps=int(reference.get("steps", 0)),
        reference_examples=int(reference.get("examples", 0)),
        study_steps=study_steps,
        study_examples=study_examples,
        reference_examples_to_target=int(to_target) if to_target else None,
    )


# ------------------------------------------------------------------------------------------


def _best_rate(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (batch size, replicate), the branch at the rate with the lowest loss."""
    finite = rows[np.isfinite(rows["val_loss"].astype(float))]
    order = finite.sort_values("val_loss")
    return order.drop_duplicates(["batch_size", "replicate"]).sort_values(
        ["batch_size", "replicate"]
    )


def _differences(best: pd.DataFrame, b0: int) -> dict[str, Any]:
    """Per batch size its mean loss excess over ``B0`` (``rel``), metric shortfall and their
    standard errors, with the pooled spread (``sd``) and its degrees of freedom (``df``).

    Branches of one replicate share the example order at every batch size (common random
    numbers), so when every batch size has ``B0``'s replicates the errors come from the
    per-replicate differences to ``B0``, pooled over batch sizes; otherwise from the spread
    within each cell, pooled, for a difference of two independent means.
    """
    wide = best.pivot_table(index="replicate", columns="batch_size", values=["rel", "short"])
    rel, short = wide["rel"], wide["short"]
    paired = bool(len(rel) > 1 and rel.notna().all().all())
    rows = []
    if paired:
        d_rel = rel.sub(rel[b0], axis=0).drop(columns=b0)
        d_short = short.sub(short[b0], axis=0).drop(columns=b0)
        sd, df = _pooled_sd(d_rel.items())
        sd_m, _ = _pooled_sd(d_short.items())
        n = len(rel)
        rows.append((b0, 0.0, 0.0, 0.0, 0.0))
        for batch in d_rel.columns:
            e, d = float(d_rel[batch].mean()), float(d_short[batch].mean())
            rows.append((int(batch), e, d, sd / math.sqrt(n), sd_m / math.sqrt(n)))
        return {"rows": rows, "sd": sd, "df": df}
    grouped = best.groupby("batch_size")
    sd, df = _pooled_sd(grouped["rel"])
    sd_m, _ = _pooled_sd(grouped["short"])
    n0 = int((best["batch_size"] == b0).sum())
    for batch, cell in grouped:
        n = len(cell)
        e = float(cell["rel"].mean()) - float(best.loc[best["batch_size"] == b0, "rel"].mean())
        d = float(cell["short"].mean())
        spread = math.sqrt(1 / n + 1 / n0) if batch != b0 else 0.0
        rows.append((int(batch), e, d, sd * spread, sd_m * spread))
    return {"rows": rows, "sd": sd, "df": df}


def _quantile(confidence: float, df: float) -> float:
    """The two-sided ``confidence`` quantile of Student's t with ``df`` degrees of freedom
    (the normal one when there are none: the interval is then the estimate)."""
    if df < 1:
        return NormalDist().inv_cdf((1 + confidence) / 2)
    from scipy import stats

    return float(stats.t.ppf((1 + confidence) / 2, df))


def _pooled_sd(groups: Any) -> tuple[float, float]:
    """The within-cell standard deviation pooled over cells with two or more values, and
    its degrees of freedom."""
    num = den = 0.0
    for _key, values in groups:
        v = values.dropna().to_numpy(float)
        if len(v) > 1:
            num += float(((v - v.mean()) ** 2).sum())
            den += len(v) - 1
    return (math.sqrt(num / den) if den else 0.0), den


def _margin(excess: float, short: float, tol: float, tol_metric: float | None) -> float:
    """How far inside the tolerance a batch size is (< 0: outside), in units of the tolerance:
    the smaller of the loss's and (when checked) the metric's."""
    loss = (tol - excess) / tol if tol > 0 else (0.0 if excess <= 0 else -math.inf)
    if tol_metric is None or not math.isfinite(short):
        return loss
    metric = (tol_metric - short) / tol_metric if tol_metric > 0 else (-short or 0.0)
    return min(loss, metric)


def _largest(sizes: list[int], margins: list[float]) -> tuple[float, bool]:
    """The largest size up to which every margin is >= 0, interpolated in log size to where
    the margin crosses zero; (largest, True) when every one is; the first when none is."""
    order = np.argsort(sizes)
    sizes = [sizes[i] for i in order]
    margins = [margins[i] for i in order]
    if margins[0] < 0:
        return float(sizes[0]), False
    for i in range(1, len(sizes)):
        if margins[i] < 0:
            m0, m1 = margins[i - 1], margins[i]
            t = m0 / (m0 - m1) if math.isfinite(m1) else 0.0
            log_b = math.log(sizes[i - 1]) + t * (math.log(sizes[i]) - math.log(sizes[i - 1]))
            return float(math.exp(log_b)), False
    return float(sizes[-1]), True
