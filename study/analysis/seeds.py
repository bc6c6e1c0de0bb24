"""Steps to result over seeds: a point run under several seeds counts by its median.

At a fixed seed, steps to target jump with tiny learning-rate changes (in MNIST-1D at batch 16,
lr 0.02717 reaches the target in 900 steps and lr 0.02684 in 1043), so the best of a search is
partly luck. Confirmation trials (``tuner.confirm``) run a stratum's best *points* (learning
rate and every other metaparameter) again under other seeds. A point's steps are then the
median over its seeds, with the fewest and most as its spread, and a group's (batch size's)
steps to result is the best median among its points with at least two seeds. A group without
such points keeps the best single trial, so studies without confirmation read as before.

Pure functions on the per-trial table (`trial_steps_to_target`): a point is the trial's
``learning_rate`` and ``hp.*`` values; its seed is the ``seed`` column (NaN: the study's seed;
a table without the column has one seed).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.analysis.table import LEARNING_RATE, SEED, hp_columns


@dataclass(frozen=True)
class SeedEstimate:
    """A group's steps to result: ``steps`` (the median over ``seeds`` seeds of its best point,
    or its best single trial when ``seeds == 1``), the spread ``low`` to ``high`` over those
    seeds, and ``index``: the row of the point's trial at the study's seed (else its first).

    Example: a point reaching the target in 900, 1043 and 980 steps under three seeds gives
    ``steps == 980``, ``low == 900``, ``high == 1043``, ``seeds == 3``.
    """

    steps: float
    low: float
    high: float
    seeds: int
    index: Hashable


def point_keys(trials: pd.DataFrame) -> list[tuple]:
    """Each trial's point: its learning rate and ``hp.*`` values, as a hashable tuple."""
    columns = [LEARNING_RATE, *hp_columns(trials)]
    values = trials[columns].astype(object).where(trials[columns].notna(), None)
    return [tuple(row) for row in values.itertuples(index=False, name=None)]


def seed_labels(trials: pd.DataFrame) -> list[Hashable]:
    """Each trial's seed (None for the study's seed, or when the table has no seed column)."""
    if SEED not in trials.columns:
        return [None] * len(trials)
    return [None if pd.isna(s) else int(s) for s in trials[SEED]]


def best_over_seeds(
    index: Sequence[Hashable],
    points: Sequence[Hashable],
    seeds: Sequence[Hashable],
    steps: Sequence[float],
    learning_rates: Sequence[float],
) -> SeedEstimate | None:
    """The best point of one group: the least median over seeds among points run under at
    least two seeds, else the least single value (ties: the smaller learning rate). None for
    an empty group. ``steps`` may be ``inf`` (never reached); a median of ``inf`` is ``inf``.

    Example: points A (lr 0.1: 100 steps at the study's seed; 140 and 150 under seeds 1, 2) and
    B (lr 0.2: 120; 125, 118) give B with median 120 although A's single trial was faster.
    """
    groups: dict[Hashable, list[int]] = {}
    for i, point in enumerate(points):
        groups.setdefault(point, []).append(i)
    values = np.asarray(steps, dtype=float)
    rates = np.asarray(learning_rates, dtype=float)
    confirmed = {p: rows for p, rows in groups.items() if len({seeds[i] for i in rows}) >= 2}
    candidates = confirmed or {(p, i): [i] for p, rows in groups.items() for i in rows}
    best: tuple[float, float] | None = None
    chosen: list[int] = []
    for rows in candidates.values():  # one row (most points): its value is its median
        median = float(values[rows[0]]) if len(rows) == 1 else float(np.median(values[rows]))
        key = (median if not math.isnan(median) else math.inf, float(rates[rows[0]]))
        if best is None or key < best:
            best, chosen = key, rows
    if best is None:
        return None
    base = [i for i in chosen if seeds[i] is None]
    picked = values[chosen]
    return SeedEstimate(
        steps=best[0],
        low=float(picked.min()),
        high=float(picked.max()),
        seeds=len({seeds[i] for i in chosen}),
        index=index[(base or chosen)[0]],
    )


def robust_steps(
    trials: pd.DataFrame, values: np.ndarray, by: Sequence[str]
) -> dict[tuple, SeedEstimate]:
    """`best_over_seeds` of ``values`` (one per row of ``trials``) in each ``by`` group.

    Example: ``robust_steps(trials, trials["steps_to_target"].to_numpy(), ["batch_size"])``.
    """
    points, seeds = point_keys(trials), seed_labels(trials)
    rates = trials[LEARNING_RATE].to_numpy(dtype=float)
    out: dict[tuple, SeedEstimate] = {}
    for key, rows in trials.groupby(list(by), sort=True, dropna=False).indices.items():
        estimate = best_over_seeds(
            [trials.index[i] for i in rows],
            [points[i] for i in rows],
            [seeds[i] for i in rows],
            values[rows],
            rates[rows],
        )
        if estimate is not None:
            out[key if isinstance(key, tuple) else (key,)] = estimate
    return out


@dataclass(frozen=True)
class SeedNoise:
    """How much steps to target vary between training seeds at one point: ``sigma``, the pooled
    standard deviation of log steps within points (batch size, learning rate and every other
    metaparameter) reached under at least two seeds; ``points`` and ``trials`` behind it, and
    ``unreached``: trials of those points that did not reach the target (left out, so
    ``sigma`` understates the noise where some seeds fail).

    Example: a point reaching the target in 900 and 1100 steps under two seeds gives
    ``sigma`` of about 0.142 (log 1100/900 over sqrt 2): one seed's reading is off by about 15%.
    """

    sigma: float
    points: int
    trials: int
    unreached: int = 0

    @property
    def ok(self) -> bool:
        return self.points > 0 and math.isfinite(self.sigma)

    @property
    def factor(self) -> float:
        """``exp(sigma)``: a typical ratio between one seed's steps and the point's."""
        return math.exp(self.sigma) if self.ok else math.nan


def seed_noise(trials: pd.DataFrame, by: Sequence[str] = ("batch_size",)) -> SeedNoise:
    """`SeedNoise` from the per-trial table (`trial_steps_to_target`): within each ``by`` group
    and point, the trials under distinct seeds that reached the target.

    Example: ``seed_noise(trial_steps_to_target(df, target)).sigma``.
    """
    if trials.empty:
        return SeedNoise(math.nan, 0, 0)
    points, seeds = point_keys(trials), seed_labels(trials)
    steps = trials["steps_to_target"].to_numpy(dtype=float)
    groups: dict[tuple, list[int]] = {}
    keys = trials[list(by)].itertuples(index=False, name=None)
    for i, key in enumerate(keys):
        groups.setdefault((key, points[i]), []).append(i)
    squares, dof, used, count, unreached = 0.0, 0, 0, 0, 0
    for rows in groups.values():
        if len({seeds[i] for i in rows}) < 2:
            continue
        logs = np.log([steps[i] for i in rows if math.isfinite(steps[i]) and steps[i] > 0])
        unreached += len(rows) - len(logs)
        if len(logs) < 2:
            continue
        squares += float(((logs - logs.mean()) ** 2).sum())
        dof += len(logs) - 1
        used, count = used + 1, count + len(logs)
    sigma = math.sqrt(squares / dof) if dof else math.nan
    return SeedNoise(sigma, used, count, unreached)
