"""Shallue et al. (2018): where steps to result scale perfectly, with diminishing returns, or not.

`scaling_efficiency` measures each step between consecutive measured batch sizes;
`scaling_regimes` splits the curve into perfect scaling, diminishing returns and maximal data
parallelism. Both read a per-batch-size table such as `summarize_trials` gives; a table with
several rows per batch size (e.g. per strategy) uses the fewest steps per batch size.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from study.analysis.fitting import as_number
from study.analysis.table import BATCH_SIZE, validate_table

Regime = Literal["perfect", "diminishing", "maximal", ""]
"""Where a batch size sits on the curve (``""``: no reading)."""

TOLERANCE = 0.2
"""The default slack of the regime rules: a step scales perfectly if its steps fall to at most
``(1 + TOLERANCE)`` times the ideal, and is flat if they fall by less than ``TOLERANCE``."""

MIN_REGIME_BATCH_SIZES = 2
"""The regimes need at least this many batch sizes that reached the target (one step)."""


def per_batch_size(steps_df: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per batch size: the one with fewest steps (a per-strategy table collapses).

    Ties go to the smaller best learning rate when the table has one.
    """
    validate_table(steps_df, [BATCH_SIZE, column])
    order = [BATCH_SIZE, column]
    if "best_learning_rate" in steps_df.columns:
        order.append("best_learning_rate")
    ranked = steps_df.sort_values(order, kind="stable", na_position="last")
    return ranked.drop_duplicates(subset=BATCH_SIZE, keep="first").reset_index(drop=True)


def scaling_efficiency(
    steps_df: pd.DataFrame, tolerance: float = TOLERANCE, *, column: str = "steps_to_result"
) -> pd.DataFrame:
    """How well each step between consecutive measured batch sizes scaled.

    For consecutive finite batch sizes ``B -> B'`` with ratio ``r = B'/B`` and steps ``S ->
    S'``: ``steps_ratio = S'/S``, ``ideal_steps_ratio = 1/r``, ``efficiency = (S/S') / r``
    (1 is perfect, 0 is no gain), ``speedup_per_doubling = (S/S') ** (log 2 / log r)`` (2 is
    perfect), ``slope`` (log-log slope; -1 is perfect), ``perfect`` (``steps_ratio <=
    ideal_steps_ratio * (1 + tolerance)``) and ``flat`` (``steps_ratio >= 1 - tolerance``).

    Example: 8 -> 16 with steps 1000 -> 520 gives ``efficiency ~= 0.96``, ``perfect == True``.
    """
    per = per_batch_size(steps_df, column)
    per = per[np.isfinite(per[column].to_numpy(dtype=float))]
    b = per[BATCH_SIZE].to_numpy(dtype=float)
    s = per[column].to_numpy(dtype=float)
    ratio, steps_ratio = b[1:] / b[:-1], s[1:] / s[:-1]
    return pd.DataFrame(
        {
            BATCH_SIZE: per[BATCH_SIZE].to_numpy()[:-1],
            "next_batch_size": per[BATCH_SIZE].to_numpy()[1:],
            "batch_ratio": ratio,
            "steps": s[:-1],
            "next_steps": s[1:],
            "steps_ratio": steps_ratio,
            "ideal_steps_ratio": 1.0 / ratio,
            "efficiency": 1.0 / (steps_ratio * ratio),
            "speedup_per_doubling": (1.0 / steps_ratio) ** (math.log(2.0) / np.log(ratio)),
            "slope": np.log(steps_ratio) / np.log(ratio),
            "perfect": steps_ratio <= (1.0 / ratio) * (1.0 + tolerance),
            "flat": steps_ratio >= 1.0 - tolerance,
        }
    )


@dataclass(frozen=True)
class Regimes:
    """Where the steps-to-result curve scales perfectly, with diminishing returns, or not at all.

    Fields: ``ok``, ``reason``; ``tolerance``; ``batch_sizes`` (finite, sorted) and ``excluded``
    (never reached); ``perfect_end`` (largest batch size of perfect scaling);
    ``max_parallel_start`` (first batch size of maximal data parallelism, None if the curve never
    flattens within the measured range); ``table`` (see `scaling_efficiency`).
    Properties ``perfect``, ``diminishing``, ``maximal`` are ``(low, high)`` batch-size ranges or
    None.
    """

    ok: bool
    reason: str = ""
    tolerance: float = TOLERANCE
    batch_sizes: tuple[int | float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    perfect_end: int | float | None = None
    max_parallel_start: int | float | None = None
    table: pd.DataFrame = field(default_factory=pd.DataFrame, compare=False, repr=False)

    @property
    def perfect(self) -> tuple[int | float, int | float] | None:
        if not self.ok:
            return None
        return self.batch_sizes[0], self.perfect_end

    @property
    def diminishing(self) -> tuple[int | float, int | float] | None:
        if not self.ok:
            return None
        end = self.batch_sizes[-1] if self.max_parallel_start is None else self.max_parallel_start
        return None if end == self.perfect_end else (self.perfect_end, end)

    @property
    def maximal(self) -> tuple[int | float, int | float] | None:
        if not self.ok or self.max_parallel_start is None:
            return None
        return self.max_parallel_start, self.batch_sizes[-1]

    def regime(self, batch_size: float) -> Regime:
        """``"perfect"``, ``"diminishing"`` or ``"maximal"`` (``""`` when not ok)."""
        if not self.ok:
            return ""
        if batch_size <= self.perfect_end:
            return "perfect"
        if self.max_parallel_start is not None and batch_size >= self.max_parallel_start:
            return "maximal"
        return "diminishing"


def scaling_regimes(
    steps_df: pd.DataFrame, tolerance: float = TOLERANCE, *, column: str = "steps_to_result"
) -> Regimes:
    """Split the measured steps-to-result curve into its three regimes.

    The rule, over the finite batch sizes ``B_0 < B_1 < ... < B_n`` with steps ``S_i``:

    * **perfect scaling** ends at ``B_k``, the largest batch size such that every consecutive
      step ``B_{i} -> B_{i+1}`` with ``i < k`` is perfect: ``S_{i+1}/S_i <= (1 + tolerance) /
      r_i`` with ``r_i = B_{i+1}/B_i`` (for doublings and tolerance 0.2: steps fall to at most
      60% of the previous). If the first step already falls short, ``perfect_end = B_0``.
    * **maximal data parallelism** begins at ``B_j``, the smallest batch size with ``j >= k``
      and ``j < n`` such that no larger batch size cuts steps by ``tolerance`` or more relative
      to it: ``S_m >= (1 - tolerance) S_j`` for every ``m > j``. The largest batch size alone
      never qualifies (one flat step is needed as evidence); None when no ``B_j`` qualifies.
    * **diminishing returns** is the range in between, ``(B_k, B_j)`` (or ``(B_k, B_n)``).

    A table with several rows per batch size (e.g. per strategy) uses the fewest steps per batch
    size. Fewer than 2 finite batch sizes give ``ok=False``.

    Example: ``S = 12800/B`` up to 128, then ``S`` shrinking by 1/4 per doubling to 1024 and flat
    beyond gives ``perfect_end == 128`` and ``max_parallel_start == 1024``.
    """
    per = per_batch_size(steps_df, column)
    finite = np.isfinite(per[column].to_numpy(dtype=float))
    b = tuple(as_number(x) for x in per.loc[finite, BATCH_SIZE])
    excluded = tuple(as_number(x) for x in per.loc[~finite, BATCH_SIZE])
    if len(b) < MIN_REGIME_BATCH_SIZES:
        return Regimes(
            ok=False,
            reason=f"fewer than {MIN_REGIME_BATCH_SIZES} batch sizes reached the target ({len(b)})",
            tolerance=tolerance,
            batch_sizes=b,
            excluded=excluded,
        )
    table = scaling_efficiency(steps_df, tolerance, column=column)
    s = per.loc[finite, column].to_numpy(dtype=float)
    k, start = regime_bounds(np.asarray(b, dtype=float), s[None, :], tolerance)
    return Regimes(
        ok=True,
        tolerance=tolerance,
        batch_sizes=b,
        excluded=excluded,
        perfect_end=b[int(k[0])],
        max_parallel_start=None if start[0] < 0 else b[int(start[0])],
        table=table,
    )


def regime_bounds(
    batch_sizes: np.ndarray, steps: np.ndarray, tolerance: float = TOLERANCE
) -> tuple[np.ndarray, np.ndarray]:
    """The rule of `scaling_regimes` on many curves at once.

    ``steps`` holds one curve per row over the sorted ``batch_sizes`` (at least two). Returns
    per row the index of the end of perfect scaling and that of the start of maximal data
    parallelism (-1 when the curve never flattens).

    Example: ``regime_bounds(np.array([8, 16, 32]), np.array([[100, 50, 48]]))`` gives
    ``([1], [1])``: perfect to 16, flat from 16.
    """
    b = np.asarray(batch_sizes, dtype=float)
    s = np.atleast_2d(np.asarray(steps, dtype=float))
    n = b.size
    perfect = s[:, 1:] / s[:, :-1] <= (1.0 / (b[1:] / b[:-1])) * (1.0 + tolerance)
    k = np.where(perfect.all(axis=1), n - 1, np.argmin(perfect, axis=1))
    later = np.minimum.accumulate(s[:, ::-1], axis=1)[:, ::-1]  # min over m >= j
    flat = later[:, 1:] >= (1.0 - tolerance) * s[:, :-1]  # j = 0 .. n-2
    flat &= np.arange(n - 1)[None, :] >= k[:, None]
    start = np.where(flat.any(axis=1), np.argmax(flat, axis=1), -1)
    return k, start
