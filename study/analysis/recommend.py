"""A decision policy on top of the fits: what to run on N accelerators and what to expect.

`recommend` turns the measured steps to result, the noise-scale fit, the scaling regimes and
(optionally) the learning-rate power law and measured throughput into a global batch size, a
learning rate and an expected speed-up. The fits describe the data; this module decides, so
its rules (which batch size, which baseline, which hardware model) live here alone.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from study.analysis.fitting import MIN_BATCH_SIZES, as_number
from study.analysis.lr_scaling import LrPowerLawFit
from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.regimes import TOLERANCE, Regime, per_batch_size, scaling_regimes
from study.analysis.table import BATCH_SIZE, REPLICAS, validate_table


@dataclass(frozen=True)
class Recommendation:
    """What to run on ``accelerators`` devices and what to expect.

    Fields: ``ok``, ``reason``; ``accelerators``; ``batch_size`` (global) and
    ``per_device_batch``; ``learning_rate`` with ``lr_source`` (``"measured"`` or
    ``"power law"``) and ``lr_on_edge``; ``regime`` of the chosen batch size; ``base_batch_size``
    (the one-accelerator baseline); ``steps`` and ``base_steps`` (measured steps to result);
    ``step_speedup`` (expected, ``S(base) / S(B)`` from the noise-scale fit) with
    ``step_speedup_ci`` (its profile-likelihood interval, see `NoiseScaleFit.speedup_interval`;
    None when the fit has no intervals) and ``measured_step_speedup`` (``base_steps /
    steps``); ``time_speedup``, ``time_speedup_ci`` and ``measured_time_speedup`` (the same
    times the per-step time ratio); ``time_source`` (``"throughput"`` or ``"ideal"``);
    ``strategy`` (fastest measured strategy with N replicas, if known); ``notes``.
    """

    ok: bool
    reason: str = ""
    accelerators: int = 1
    batch_size: int | float | None = None
    per_device_batch: float = math.nan
    learning_rate: float = math.nan
    lr_source: Literal["measured", "power law", ""] = ""
    lr_on_edge: bool = False
    regime: Regime = ""
    base_batch_size: int | float | None = None
    steps: float = math.nan
    base_steps: float = math.nan
    step_speedup: float = math.nan
    step_speedup_ci: tuple[float, float] | None = None
    measured_step_speedup: float = math.nan
    time_speedup: float = math.nan
    time_speedup_ci: tuple[float, float] | None = None
    measured_time_speedup: float = math.nan
    time_source: str = ""
    strategy: str | None = None
    notes: tuple[str, ...] = ()


def recommend(
    steps_df: pd.DataFrame,
    fit: NoiseScaleFit,
    throughput_df: pd.DataFrame | None = None,
    accelerators: int = 1,
    base_batch: int | None = None,
    *,
    lr_fit: LrPowerLawFit | None = None,
    tolerance: float = TOLERANCE,
) -> Recommendation:
    """Recommend a global batch size, learning rate and expected speed-up for N accelerators.

    * **Batch size**: the largest measured batch size (target reached) divisible by
      ``accelerators`` and no larger than ``max(perfect_end, B_noise)``: still in perfect
      scaling (`scaling_regimes` with ``tolerance``), or up to the noise scale, where a run
      takes at most twice the minimum examples (McCandlish et al.). If every divisible one is
      larger, the smallest of them, with a note.
    * **Learning rate**: the measured best rate at that batch size; the ``lr_fit`` prediction
      if none was measured.
    * **Speed-up in steps** over the baseline (``base_batch``, default the smallest measured
      batch size, on one accelerator): ``S(base) / S(B)`` from ``fit``, with the profile
      interval of that ratio (at ``fit.confidence``) as the uncertainty band; the measured
      ratio is reported too.
    * **Speed-up in wall time**: the step speed-up times the ratio of seconds per step. With
      ``throughput_df`` (from `throughput_by_strategy`): the fastest strategy with
      ``accelerators`` replicas at B against one replica at the baseline. Otherwise ideal
      hardware: seconds per step proportional to the per-device batch (no communication or
      fixed overhead), a factor ``accelerators * base / B``; equal per-step times when
      ``B = accelerators * base``.

    Example: perfect scaling to 128 and ``B_noise ~ 100`` give ``batch_size == 128`` for 4
    accelerators; with 3 accelerators no power of two divides, so ``ok=False``.

    Raises:
        ValueError: if ``accelerators < 1``.
    """
    if accelerators < 1:
        raise ValueError(f"accelerators must be >= 1 (got {accelerators})")
    per = per_batch_size(steps_df, "steps_to_result")
    per = per[np.isfinite(per["steps_to_result"].to_numpy(dtype=float))].set_index(BATCH_SIZE)
    measured = ", ".join(f"{x:g}" for x in per.index)

    def refuse(reason: str) -> Recommendation:
        return Recommendation(ok=False, reason=reason, accelerators=accelerators)

    if len(per) < MIN_BATCH_SIZES:
        return refuse(f"fewer than {MIN_BATCH_SIZES} batch sizes reached the target ({len(per)})")
    if not fit.ok:
        return refuse(f"no noise-scale fit: {fit.reason}")
    base = per.index.min() if base_batch is None else base_batch
    if base not in per.index:
        return refuse(f"base batch size {base} did not reach the target (measured: {measured})")
    regimes = scaling_regimes(steps_df, tolerance)
    chosen, notes = _choose_batch(
        list(per.index), accelerators, max(float(regimes.perfect_end), fit.b_noise)
    )
    if chosen is None:
        return refuse(
            f"no batch size that reached the target is divisible by {accelerators} "
            f"accelerators (measured: {measured})"
        )
    row = per.loc[chosen]
    learning_rate, lr_source = float(row.get("best_learning_rate", math.nan)), "measured"
    if not math.isfinite(learning_rate) and lr_fit is not None and lr_fit.ok:
        learning_rate, lr_source = float(lr_fit.predict(chosen)), "power law"
    lr_on_edge = bool(row.get("lr_on_edge", False))
    if lr_on_edge:
        notes.append("the best learning rate sits on the edge of its search range")

    base_steps, steps = float(per.loc[base, "steps_to_result"]), float(row["steps_to_result"])
    step_speedup = fit.speedup(float(base), float(chosen))
    step_ci = fit.speedup_interval(float(base), float(chosen))
    factor, time_source, strategy, time_notes = time_factor(
        throughput_df, float(base), float(chosen), accelerators
    )
    return Recommendation(
        ok=True,
        accelerators=accelerators,
        batch_size=as_number(chosen),
        per_device_batch=float(chosen) / accelerators,
        learning_rate=learning_rate,
        lr_source=lr_source,
        lr_on_edge=lr_on_edge,
        regime=regimes.regime(chosen),
        base_batch_size=as_number(base),
        steps=steps,
        base_steps=base_steps,
        step_speedup=step_speedup,
        step_speedup_ci=step_ci,
        measured_step_speedup=base_steps / steps,
        time_speedup=step_speedup * factor,
        time_speedup_ci=None if step_ci is None else (step_ci[0] * factor, step_ci[1] * factor),
        measured_time_speedup=base_steps / steps * factor,
        time_source=time_source,
        strategy=strategy,
        notes=(*notes, *time_notes),
    )


# ------------------------------------------------------------------------------------ pieces


def _choose_batch(
    batches: Sequence[float], accelerators: int, limit: float
) -> tuple[float | None, list[str]]:
    """The largest batch size divisible by ``accelerators`` up to ``limit`` (else the smallest)."""
    divisible = [b for b in batches if float(b) % accelerators == 0]
    if not divisible:
        return None, []
    within = [b for b in divisible if b <= limit]
    if within:
        return max(within), []
    note = (
        f"every usable batch size exceeds perfect scaling and B_noise ({limit:.3g}); "
        f"took the smallest divisible by {accelerators}"
    )
    return min(divisible), [note]


def _fastest(throughput: pd.DataFrame | None, batch: float, replicas: int) -> pd.Series | None:
    """The row of the fastest strategy at ``batch`` with ``replicas`` (None if unmeasured)."""
    if throughput is None or throughput.empty:
        return None
    validate_table(throughput, ["strategy", REPLICAS, BATCH_SIZE, "seconds_per_step"])
    seconds = throughput["seconds_per_step"].astype(float)
    rows = throughput[
        (throughput[BATCH_SIZE].astype(float) == float(batch))
        & (throughput[REPLICAS].astype(float) == float(replicas))
        & np.isfinite(seconds)
    ]
    if rows.empty:
        return None
    return rows.loc[rows["seconds_per_step"].astype(float).idxmin()]


def time_factor(
    throughput: pd.DataFrame | None, base: float, chosen: float, accelerators: int
) -> tuple[float, str, str | None, list[str]]:
    """Seconds per step at the baseline over seconds per step at the recommendation."""
    fast, slow = _fastest(throughput, chosen, accelerators), _fastest(throughput, base, 1)
    if fast is not None and slow is not None:
        factor = float(slow["seconds_per_step"]) / float(fast["seconds_per_step"])
        return factor, "throughput", str(fast["strategy"]), []
    notes = []
    if throughput is not None:
        notes.append(
            f"no throughput measured for batch {chosen:g} on {accelerators} replicas or batch "
            f"{base:g} on 1; assumed seconds per step proportional to the per-device batch"
        )
    return accelerators * base / chosen, "ideal", None, notes
