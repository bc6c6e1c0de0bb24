"""What the measured steps per batch size say without a model.

Every answer read off a fitted curve (`study.analysis.answers`) can be checked against the data
alone. `pooled_steps` turns a per-trial table into one steps-to-result per batch size, pooling
training seeds by their median; `model_free_readings` reads that curve:

* the examples ratio ``E(B) / E(B_0)`` per batch size, ``E = B * S`` and ``B_0`` the smallest
  batch size that reached the target;
* the **overhead point**: the batch size where that ratio first exceeds ``1 + overhead``, by
  linear interpolation of ``log ratio`` against ``log B`` between the two measured batch sizes
  around it (the *bracket*); when no measured size exceeds it, the point is *beyond* the largest
  (``critical = inf``, bracket ``(largest, inf)``: a bound);
* the end of perfect scaling and the start of maximal data parallelism, by the rules of
  `study.analysis.regimes.scaling_regimes` on the same curve.

The model's critical batch size is relative to ``E_min``, the limit at small batch sizes; this
reading is relative to ``E(B_0)``, which is ``E_min`` only where ``B_0`` is far below the knee.

Example: steps 1000, 500, 250, 125, 90 at batch sizes 16 to 256 give ratios 1, 1, 1, 1, 1.44:
20% overhead is first exceeded at 256; 1.2 is halfway to 1.44 in log, so the point is 181,
halfway from 128 to 256 in log (bracket 128-256).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.analysis.fitting import as_number
from study.analysis.regimes import (
    MIN_REGIME_BATCH_SIZES,
    TOLERANCE,
    per_batch_size,
    scaling_regimes,
)
from study.analysis.seeds import robust_steps
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, validate_table

OVERHEAD = 0.2
"""The default overhead of the critical batch size (that of `study.analysis.answers`)."""

STEPS = "steps_to_result"
"""The per-batch-size column `model_free_readings` reads (as `summarize_trials` names it)."""


def pooled_steps(trials: pd.DataFrame, *, column: str = "steps_to_target") -> pd.DataFrame:
    """Steps to result per batch size, training seeds pooled by their median.

    Per point (batch size, learning rate and every ``hp.*`` value) run under at least two seeds
    (the ``seed`` column) the median of ``column`` over its seeds; per batch size the fewest of
    those medians (`study.analysis.seeds.best_over_seeds`, the rule of `summarize_trials`). A
    trial that never reached the target (``inf`` or NaN) counts as infinite steps, so a median
    is infinite exactly when at least half of the point's seeds failed: with three seeds, one
    failure gives the slower of the other two. A table with one seed per point (a normal study)
    gives the best trial per batch size.

    Example: a point at 100, 120 and never (seeds 0-2) has median 120; one at 90 and never
    (two seeds) has median inf.

    Returns:
        Columns ``batch_size``, ``steps_to_result`` (``inf`` where nothing reached),
        ``steps_low``/``steps_high`` (the chosen point's spread over its seeds), ``seeds`` and
        ``best_learning_rate`` (NaN where nothing reached); one row per batch size, sorted.

    Raises:
        ValueError: if a column is missing.
    """
    validate_table(trials, [BATCH_SIZE, LEARNING_RATE, column])
    trials = trials.reset_index(drop=True)
    values = pd.to_numeric(trials[column], errors="coerce").to_numpy(dtype=float)
    values = np.where(np.isnan(values), math.inf, values)
    rows = []
    for (batch,), estimate in robust_steps(trials, values, [BATCH_SIZE]).items():
        reached = math.isfinite(estimate.steps)
        rows.append(
            {
                BATCH_SIZE: as_number(batch),
                STEPS: estimate.steps,
                "steps_low": estimate.low,
                "steps_high": estimate.high,
                "seeds": estimate.seeds,
                "best_learning_rate": (
                    float(trials.loc[estimate.index, LEARNING_RATE]) if reached else math.nan
                ),
            }
        )
    columns = [BATCH_SIZE, STEPS, "steps_low", "steps_high", "seeds", "best_learning_rate"]
    return pd.DataFrame(rows, columns=columns).sort_values(BATCH_SIZE, ignore_index=True)


@dataclass(frozen=True)
class ModelFree:
    """The model-free readings of one steps-per-batch-size curve (see the module).

    Fields: ``ok``/``reason``; ``overhead``, ``tolerance``; ``batch_sizes`` (that reached,
    sorted), ``steps`` and ``ratios`` (``E(B) / E(B_0)``) on them, ``excluded`` (never
    reached); ``critical`` (the interpolated overhead point, ``inf`` when beyond the measured
    sizes), ``bracket`` (the two measured sizes around it, ``(largest, inf)`` when beyond);
    ``perfect_end`` and ``max_parallel_start`` (``inf`` when the curve never flattens).
    """

    ok: bool
    reason: str = ""
    overhead: float = OVERHEAD
    tolerance: float = TOLERANCE
    batch_sizes: tuple[int | float, ...] = ()
    steps: tuple[float, ...] = ()
    ratios: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    critical: float = math.nan
    bracket: tuple[float, float] | None = None
    perfect_end: float = math.nan
    max_parallel_start: float = math.nan

    @property
    def beyond(self) -> bool:
        """True when no measured batch size exceeds the overhead (``critical`` is a bound)."""
        return self.ok and math.isinf(self.critical)

    def to_dict(self) -> dict[str, object]:
        """The readings as plain JSON values (``None`` for NaN and infinity)."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "overhead": self.overhead,
            "tolerance": self.tolerance,
            "batch_sizes": list(self.batch_sizes),
            "steps": [_plain(s) for s in self.steps],
            "ratios": [_plain(r) for r in self.ratios],
            "excluded": list(self.excluded),
            "critical": _plain(self.critical),
            "beyond": self.beyond,
            "bracket": None if self.bracket is None else [_plain(b) for b in self.bracket],
            "perfect_end": _plain(self.perfect_end),
            "max_parallel_start": _plain(self.max_parallel_start),
        }

    def text(self) -> str:
        """One line, e.g. ``"20% overhead at 362 (256-512); perfect to 256; maximal beyond"``."""
        if not self.ok:
            return f"no model-free reading: {self.reason}"
        if self.beyond:
            point = f"beyond {as_number(self.bracket[0])}" if self.bracket else "beyond"
        else:
            low, high = self.bracket or (math.nan, math.nan)
            point = f"at {self.critical:.0f} ({as_number(low)}-{as_number(high)})"
        maximal = (
            "maximal beyond"
            if math.isinf(self.max_parallel_start)
            else f"maximal from {as_number(self.max_parallel_start)}"
        )
        return (
            f"{self.overhead:.0%} overhead {point}; perfect to {as_number(self.perfect_end)}; "
            f"{maximal}"
        )


def model_free_readings(
    steps: pd.DataFrame, *, overhead: float = OVERHEAD, tolerance: float = TOLERANCE
) -> ModelFree:
    """The `ModelFree` readings of a per-batch-size table (``batch_size``, ``steps_to_result``;
    several rows per batch size use the fewest steps, as `scaling_regimes` does).

    Thin data never raises: fewer than two batch sizes that reached give ``ok=False``.

    Raises:
        ValueError: if ``overhead`` is not positive or a column is missing.
    """
    if not overhead > 0.0:
        raise ValueError(f"overhead must be > 0 (got {overhead})")
    per = per_batch_size(steps, STEPS)
    values = per[STEPS].to_numpy(dtype=float)
    finite = np.isfinite(values) & (values > 0)
    batches = per.loc[finite, BATCH_SIZE].to_numpy(dtype=float)
    settings = {
        "overhead": overhead,
        "tolerance": tolerance,
        "batch_sizes": tuple(as_number(b) for b in batches),
        "steps": tuple(float(s) for s in values[finite]),
        "excluded": tuple(as_number(b) for b in per.loc[~finite, BATCH_SIZE]),
    }
    if batches.size < MIN_REGIME_BATCH_SIZES:
        return ModelFree(
            ok=False,
            reason=f"fewer than {MIN_REGIME_BATCH_SIZES} batch sizes reached the target "
            f"({batches.size})",
            **settings,
        )
    examples = batches * values[finite]
    ratios = examples / examples[0]
    critical, bracket = _overhead_point(batches, ratios, overhead)
    regimes = scaling_regimes(per.loc[finite], tolerance)
    start = regimes.max_parallel_start
    return ModelFree(
        ok=True,
        ratios=tuple(float(r) for r in ratios),
        critical=critical,
        bracket=bracket,
        perfect_end=float(regimes.perfect_end),
        max_parallel_start=math.inf if start is None else float(start),
        **settings,
    )


def _overhead_point(
    batches: np.ndarray, ratios: np.ndarray, overhead: float
) -> tuple[float, tuple[float, float]]:
    """The first crossing of ``1 + overhead`` by ``ratios``, interpolated in log-log, and its
    bracket; ``(inf, (largest, inf))`` when no ratio exceeds it."""
    above = np.nonzero(ratios > 1.0 + overhead)[0]
    if above.size == 0:
        return math.inf, (float(batches[-1]), math.inf)
    i = int(above[0])  # >= 1: the first ratio is 1
    x0, x1 = np.log(batches[i - 1 : i + 1])
    y0, y1 = np.log(ratios[i - 1 : i + 1])
    share = (math.log1p(overhead) - y0) / (y1 - y0)
    return float(np.exp(x0 + share * (x1 - x0))), (float(batches[i - 1]), float(batches[i]))


def _plain(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else float(x)
