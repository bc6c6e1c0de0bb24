"""Time to result per (batch size, strategy): steps to result times measured seconds per step.

Synchronous data parallelism does the same arithmetic whatever the strategy, so steps to
result depend on the batch size alone; what a strategy changes is the time per step. A short
throughput probe (``study probe``) measures seconds per step for each (batch size, strategy);
`time_to_result` multiplies them by the steps to result at that batch size: the measured best
(pooled over strategies) where the study measured the batch size, else the noise-scale fit
``S(B) = S_min (1 + B_noise / B)`` (flagged, and flagged again outside the fitted range). The
fastest row is the batch size and strategy that minimise wall time, which need not be the
one with the fewest steps.

Replica counts the probe did not measure are never filled in silently: `extrapolate_replicas`
gives, only when asked and flagged as such, the seconds per step N replicas would take if
each replica kept the throughput measured with the most replicas probed (no communication
cost: a lower bound on time).

Pure functions over DataFrames: nothing here runs TensorFlow or reads a ledger.

Example::

    rows = [row.to_stored() for row in ledger.notes.throughput()]
    model = time_to_result(probe_frame(rows), report.steps, report.noise_scale)
    model.best["batch_size"], model.best["strategy"], model.best["time_to_result"]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.table import BATCH_SIZE, REPLICAS, STRATEGY, validate_table

SECONDS_PER_STEP = "seconds_per_step"
PROBE_COLUMNS = (BATCH_SIZE, STRATEGY, REPLICAS, SECONDS_PER_STEP)
"""The columns a probe frame must have; ``seconds_low``/``seconds_high`` (the spread over
repeats), ``repeats``, ``steps``, ``measured_at`` and ``hardware`` are optional."""

MEASURED = "measured"
"""``steps_source``: the study's best trial at this batch size."""
FIT = "fit"
"""``steps_source``: the noise-scale fit, inside the fitted batch sizes."""
FIT_EXTRAPOLATED = "fit, extrapolated"
"""``steps_source``: the noise-scale fit, outside the fitted batch sizes."""
NOT_REACHED = "not reached"
"""``steps_source``: the study measured the batch size and no trial reached the target."""
UNKNOWN = "unknown"
"""``steps_source``: neither measured nor predictable (no fit)."""

TIME_COLUMNS = (
    BATCH_SIZE,
    STRATEGY,
    REPLICAS,
    "steps_to_result",
    "steps_low",
    "steps_high",
    "steps_source",
    SECONDS_PER_STEP,
    "seconds_low",
    "seconds_high",
    "time_to_result",
    "time_low",
    "time_high",
    "extrapolated",
    "fastest",
)
"""The columns of `TimeModel.table`."""


@dataclass(frozen=True)
class TimeModel:
    """Predicted time to result for every probed (batch size, strategy).

    Fields: ``ok`` and ``reason`` (why there is no prediction); ``table`` (`TIME_COLUMNS`,
    sorted by time; ``steps_low``/``steps_high``: the spread over seeds of a measured batch
    size or the fit's pointwise interval; ``seconds_low``/``seconds_high``: the spread over the
    probe's repeats; ``time_low``/``time_high``: the two combined; ``extrapolated``: a row
    from `extrapolate_replicas`; ``fastest``: the least time among rows not extrapolated);
    ``best`` (that row as a dict, None without one); ``fewest_steps`` (the probed row with the
    fewest measured steps to result, ties to the faster; fitted steps only when none was
    measured); ``measured_at``, ``hardware``, ``repeats``
    and ``probe_steps``: how the probe was made (several values joined by ", ").

    Example: batch 128 at 200 steps x 0.01 s and batch 512 at 120 steps x 0.03 s give
    ``best["batch_size"] == 128`` (2 s) though 512 has the fewest steps (3.6 s).
    """

    ok: bool
    reason: str = ""
    table: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=list(TIME_COLUMNS)), repr=False
    )
    best: Mapping[str, Any] | None = None
    fewest_steps: Mapping[str, Any] | None = None
    measured_at: str = ""
    hardware: str = ""
    repeats: str = ""
    probe_steps: str = ""

    @property
    def slowdown_of_fewest_steps(self) -> float:
        """How many times longer the fewest-steps row takes than the fastest (NaN if unknown)."""
        if self.best is None or self.fewest_steps is None:
            return math.nan
        return float(self.fewest_steps["time_to_result"]) / float(self.best["time_to_result"])


def probe_frame(rows: Sequence[Mapping[str, Any]] | pd.DataFrame | None) -> pd.DataFrame:
    """Probe rows (the stored form of ``ledger.notes.throughput()``, `ThroughputRow.to_stored`)
    as a frame with `PROBE_COLUMNS`; rows without a finite positive ``seconds_per_step`` (a
    probe that failed) are left out.

    Raises:
        ValueError: naming the missing columns, when rows lack one of `PROBE_COLUMNS`.
    """
    frame = pd.DataFrame(rows) if not isinstance(rows, pd.DataFrame) else rows.copy()
    if frame.empty:
        return pd.DataFrame(columns=list(PROBE_COLUMNS))
    validate_table(frame, PROBE_COLUMNS)
    seconds = pd.to_numeric(frame[SECONDS_PER_STEP], errors="coerce").to_numpy(dtype=float)
    keep = np.isfinite(seconds) & (seconds > 0)
    return frame[keep].reset_index(drop=True)


def steps_at(batch_sizes: Sequence[float], steps: pd.DataFrame, fit: NoiseScaleFit) -> pd.DataFrame:
    """Steps to result at each of ``batch_sizes``: measured where ``steps`` (one row per batch
    size, as `summarize_trials` gives it) has the batch size, else from ``fit``.

    Returns:
        One row per batch size: ``batch_size``, ``steps_to_result``, ``steps_low``,
        ``steps_high`` and ``steps_source`` (`MEASURED`, `NOT_REACHED`, `FIT`,
        `FIT_EXTRAPOLATED` or `UNKNOWN`).
    """
    measured = steps.set_index(steps[BATCH_SIZE].astype(float)) if len(steps) else None
    fitted = [float(b) for b in fit.batch_sizes]
    wanted = sorted({float(b) for b in batch_sizes})
    unmeasured = [b for b in wanted if measured is None or b not in measured.index]
    band = fit.steps_band(np.asarray(unmeasured)) if fit.ok and unmeasured else None
    bands = dict(zip(unmeasured, zip(*band))) if band is not None else {}
    rows = []
    for batch in wanted:
        if measured is not None and batch in measured.index:
            row = measured.loc[batch]
            value = float(row["steps_to_result"])
            low = _get(row, "steps_low", value)
            high = _get(row, "steps_high", value)
            source = MEASURED if math.isfinite(value) else NOT_REACHED
        elif fit.ok:
            value = float(fit.predict_steps(batch))
            low, high = (float(x) for x in bands.get(batch, (value, value)))
            inside = fitted and min(fitted) <= batch <= max(fitted)
            source = FIT if inside else FIT_EXTRAPOLATED
        else:
            value = low = high = math.nan
            source = UNKNOWN
        rows.append(
            {
                BATCH_SIZE: batch,
                "steps_to_result": value,
                "steps_low": low,
                "steps_high": high,
                "steps_source": source,
            }
        )
    return pd.DataFrame(
        rows, columns=[BATCH_SIZE, "steps_to_result", "steps_low", "steps_high", "steps_source"]
    )


def time_to_result(
    probe: pd.DataFrame,
    steps: pd.DataFrame,
    fit: NoiseScaleFit,
    *,
    extrapolated: pd.DataFrame | None = None,
) -> TimeModel:
    """Time to result for every row of ``probe`` (and of ``extrapolated``, flagged).

    ``time_to_result = steps_to_result(B) x seconds_per_step(B, strategy)`` (see `steps_at`
    for the steps). A batch size that never reached the target takes ``inf``; one without
    measured steps and without a fit has no time (NaN). The fastest row is chosen among the
    probed rows with a finite time, never among extrapolated ones.

    Args:
        probe: `probe_frame` of the probe's rows.
        steps: steps to result per batch size (`summarize_trials`, e.g. ``report.steps``).
        fit: the noise-scale fit, for batch sizes the study did not measure.
        extrapolated: rows of `extrapolate_replicas` to show alongside (never chosen).
    """
    probe = probe_frame(probe)
    if probe.empty:
        return TimeModel(ok=False, reason="no throughput probe with a measured time per step")
    parts = [probe.assign(extrapolated=False)]
    if extrapolated is not None and len(extrapolated):
        parts.append(probe_frame(extrapolated).assign(extrapolated=True))
    rows = pd.concat(parts, ignore_index=True)
    rows[BATCH_SIZE] = rows[BATCH_SIZE].astype(float)
    for column in ("seconds_low", "seconds_high"):
        if column not in rows.columns:
            rows[column] = rows[SECONDS_PER_STEP]
        rows[column] = pd.to_numeric(rows[column], errors="coerce").fillna(rows[SECONDS_PER_STEP])
    table = rows.merge(steps_at(list(rows[BATCH_SIZE]), steps, fit), on=BATCH_SIZE, how="left")
    seconds = table[SECONDS_PER_STEP].astype(float)
    with np.errstate(invalid="ignore"):
        table["time_to_result"] = table["steps_to_result"] * seconds
        table["time_low"] = table["steps_low"] * table["seconds_low"].astype(float)
        table["time_high"] = table["steps_high"] * table["seconds_high"].astype(float)
    table = table.sort_values(
        ["extrapolated", "time_to_result", BATCH_SIZE, STRATEGY], kind="stable"
    ).reset_index(drop=True)
    time = table["time_to_result"].to_numpy(dtype=float)
    chosen = np.isfinite(time) & ~table["extrapolated"].to_numpy(dtype=bool)
    table["fastest"] = False
    best = fewest = None
    if chosen.any():
        first = int(np.flatnonzero(chosen)[0])
        table.loc[first, "fastest"] = True
        best = _record(table.loc[first])
        candidates = table[chosen]
        if (candidates["steps_source"] == MEASURED).any():  # the fewest measured steps
            candidates = candidates[candidates["steps_source"] == MEASURED]
        candidates = candidates.sort_values(["steps_to_result", "time_to_result"], kind="stable")
        fewest = _record(candidates.iloc[0])
    table[BATCH_SIZE] = [_whole(b) for b in table[BATCH_SIZE]]
    reason = "" if best else "no probed batch size has steps to result (measured or fitted)"
    return TimeModel(
        ok=best is not None,
        reason=reason,
        table=table[[*TIME_COLUMNS, *_extra_columns(table)]],
        best=best,
        fewest_steps=fewest,
        measured_at=_joined(probe, "measured_at"),
        hardware=_joined(probe, "hardware"),
        repeats=_joined(probe, "repeats"),
        probe_steps=_joined(probe, "steps"),
    )


def extrapolate_replicas(probe: pd.DataFrame, replicas: int) -> pd.DataFrame:
    """Seconds per step on ``replicas`` devices where the probe measured fewer, flagged.

    Per batch size divisible by ``replicas`` whose most-replica probed row has ``k <
    replicas`` replicas: ``seconds_per_step x k / replicas`` (each replica keeps the throughput
    measured on k; no communication cost, so a lower bound on time). Its ``strategy`` reads
    ``"N replicas (from S)"`` and ``basis`` names the row it came from. Empty when the probe
    measured ``replicas`` or more, or no batch size divides.

    Example: batch 512 probed at 0.04 s/step on ``mirrored:2`` gives 0.01 s/step for 8.
    """
    probe = probe_frame(probe)
    if probe.empty or replicas < 1:
        return pd.DataFrame(columns=[*PROBE_COLUMNS, "basis"])
    probe = probe.assign(_replicas=pd.to_numeric(probe[REPLICAS], errors="coerce"))
    if probe["_replicas"].max() >= replicas:
        return pd.DataFrame(columns=[*PROBE_COLUMNS, "basis"])
    rows = []
    for batch, group in probe.groupby(BATCH_SIZE, sort=True):
        if float(batch) % replicas:
            continue
        most = group[group["_replicas"] == group["_replicas"].max()]
        source = most.loc[most[SECONDS_PER_STEP].astype(float).idxmin()]
        factor = float(source["_replicas"]) / replicas
        rows.append(
            {
                BATCH_SIZE: batch,
                STRATEGY: f"{replicas} replicas (from {source[STRATEGY]})",
                REPLICAS: replicas,
                SECONDS_PER_STEP: float(source[SECONDS_PER_STEP]) * factor,
                "seconds_low": _get(source, "seconds_low", float(source[SECONDS_PER_STEP]))
                * factor,
                "seconds_high": _get(source, "seconds_high", float(source[SECONDS_PER_STEP]))
                * factor,
                "basis": str(source[STRATEGY]),
            }
        )
    return pd.DataFrame(
        rows, columns=[*PROBE_COLUMNS, "seconds_low", "seconds_high", "basis"]
    ).reset_index(drop=True)


# ------------------------------------------------------------------------------------ pieces


def _get(row: pd.Series, column: str, default: float) -> float:
    value = pd.to_numeric(row.get(column, default), errors="coerce")
    return float(value) if pd.notna(value) else default


def _record(row: pd.Series) -> dict[str, Any]:
    out = {k: row[k] for k in TIME_COLUMNS if k in row.index}
    out[BATCH_SIZE] = _whole(out[BATCH_SIZE])
    return out


def _whole(value: Any) -> Any:
    """A batch size as an int when it is whole (``128.0`` -> ``128``)."""
    x = float(value)
    return int(x) if x.is_integer() else x


def _extra_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in ("basis",) if c in table.columns]


def _joined(probe: pd.DataFrame, column: str) -> str:
    if column not in probe.columns:
        return ""
    values = [str(_whole(v)) if isinstance(v, float) else str(v) for v in probe[column].dropna()]
    return ", ".join(dict.fromkeys(v for v in values if v))
