"""McCandlish et al. (2018): the noise-scale model of steps to result, with a bootstrap.

``S(B) = S_min (1 + B_noise / B)``; equivalently ``E(B) = B S(B) = E_min (1 + B / B_noise)``
with ``E_min = S_min B_noise``. `fit_noise_scale` fits one steps-to-result value per batch size;
`fit_noise_scale_from_trials` fits per-trial steps and takes its intervals from a bootstrap
that resamples the trials of every batch size.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import optimize

from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES, as_number, percentile_interval
from study.analysis.table import BATCH_SIZE, validate_table

SEARCH_FACTOR = 1e3
"""B_noise is searched within this factor below the smallest and above the largest measured
batch size (e.g. 8 to 4,096,000 for batch sizes 8 to 4096)."""

_GRID = 241
"""Points of the grid over log B_noise that gives the least-squares fit its start."""


@dataclass(frozen=True)
class NoiseScaleFit:
    """``S(B) = s_min (1 + b_noise / B)`` fitted in log space, with bootstrap intervals.

    Fields: ``ok`` and ``reason`` (why not ok); ``s_min``, ``b_noise``, ``e_min`` (``= s_min *
    b_noise``) and their ``*_ci`` ``(low, high)`` percentile intervals at ``confidence`` (None
    without bootstrap); ``batch_sizes`` and ``steps`` used; ``excluded`` batch sizes (target never
    reached, i.e. infinite steps); ``residual_rms`` in natural-log units; ``n_boot`` successful
    bootstrap replicates; ``notes`` (e.g. B_noise outside the measured range).

    Example: ``fit.predict_steps(256)`` is ``2 * fit.s_min`` when ``fit.b_noise == 256``.
    """

    ok: bool
    reason: str = ""
    s_min: float = math.nan
    b_noise: float = math.nan
    e_min: float = math.nan
    s_min_ci: tuple[float, float] | None = None
    b_noise_ci: tuple[float, float] | None = None
    e_min_ci: tuple[float, float] | None = None
    confidence: float = CONFIDENCE
    batch_sizes: tuple[int | float, ...] = ()
    steps: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    residual_rms: float = math.nan
    n_boot: int = 0
    notes: tuple[str, ...] = ()
    boot_s_min: tuple[float, ...] = field(default=(), repr=False)
    boot_b_noise: tuple[float, ...] = field(default=(), repr=False)

    def predict_steps(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``S(B) = s_min (1 + b_noise / B)`` (NaN when not ok)."""
        b = np.asarray(batch_size, dtype=float)
        return self.s_min * (1.0 + self.b_noise / b)

    def predict_examples(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``E(B) = B S(B) = e_min (1 + B / b_noise)``."""
        return np.asarray(batch_size, dtype=float) * self.predict_steps(batch_size)

    def steps_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise bootstrap ``(low, high)`` of ``S(B)``; None without bootstrap replicates."""
        if not self.boot_s_min:
            return None
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        s_min = np.asarray(self.boot_s_min)[:, None]
        b_noise = np.asarray(self.boot_b_noise)[:, None]
        curves = s_min * (1.0 + b_noise / b[None, :])
        tail = (1.0 - (self.confidence if confidence is None else confidence)) / 2.0
        low, high = np.quantile(curves, [tail, 1.0 - tail], axis=0)
        return low, high

    def examples_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise bootstrap ``(low, high)`` of ``E(B) = B S(B)``."""
        band = self.steps_band(batch_size, confidence)
        if band is None:
            return None
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        return b * band[0], b * band[1]


def fit_noise_scale(
    batch_sizes: Sequence[float],
    steps: Sequence[float],
    *,
    n_boot: int = 0,
    confidence: float = CONFIDENCE,
    seed: int | np.random.Generator | None = 0,
) -> NoiseScaleFit:
    """Fit ``S(B) = S_min (1 + B_noise / B)`` to one steps-to-result value per batch size.

    Least squares on ``log S`` (so every batch size weighs the same, relatively), with both
    parameters positive. Batch sizes whose steps are ``inf`` (target never reached), NaN or
    not positive are left out and listed in ``excluded``. With ``n_boot > 0`` the intervals come
    from a residual bootstrap in log space; prefer `fit_noise_scale_from_trials`, which
    resamples trials.

    Example: steps ``200 * (1 + 256 / B)`` at ``B = 8, 16, ..., 4096`` give ``s_min == 200`` and
    ``b_noise == 256``; two batch sizes give ``ok=False``, ``reason="fewer than 3 batch sizes
    reached the target (2)"``.
    """
    b, s, excluded = _prepare(batch_sizes, steps)
    fit = _point_fit(b, s, excluded, confidence)
    if not fit.ok or n_boot <= 0:
        return fit
    rng = np.random.default_rng(seed)
    log_b = np.log(b)
    fitted = math.log(fit.s_min) + np.logaddexp(0.0, math.log(fit.b_noise) - log_b)
    residuals = np.log(s) - fitted
    bounds = _log_bounds(b)
    samples = [
        _fit_log_space(b, np.exp(fitted + rng.choice(residuals, size=residuals.size)), bounds)
        for _ in range(n_boot)
    ]
    return _with_bootstrap(fit, samples, n_boot)


def fit_noise_scale_from_trials(
    trials: pd.DataFrame,
    *,
    steps_column: str = "steps_to_target",
    n_boot: int = 1000,
    confidence: float = CONFIDENCE,
    seed: int | np.random.Generator | None = 0,
) -> NoiseScaleFit:
    """Fit the noise scale to per-trial steps, with a bootstrap over trials.

    ``trials`` has one row per trial (as from `trial_steps_to_target`): ``batch_size`` and
    ``steps_column`` (``inf`` when the trial never reached the target). The point estimate fits
    steps to result = the min over each batch size's trials. Each bootstrap replicate resamples
    the trials of every batch size with replacement, takes the min again and refits; replicates
    where fewer than 3 batch sizes reached the target are dropped (and counted in ``notes``).
    The intervals are percentile intervals at ``confidence``.

    Example: ``fit_noise_scale_from_trials(trial_steps_to_target(df, target), n_boot=200)``.
    """
    validate_table(trials, [BATCH_SIZE, steps_column])
    groups = [
        (float(batch), group[steps_column].to_numpy(dtype=float))
        for batch, group in trials.groupby(BATCH_SIZE, sort=True)
    ]
    batch = np.array([g[0] for g in groups])
    best = np.array([np.nanmin(g[1]) if np.any(~np.isnan(g[1])) else np.inf for g in groups])
    b, s, excluded = _prepare(batch, best)
    fit = _point_fit(b, s, excluded, confidence)
    if not fit.ok or n_boot <= 0:
        return fit
    rng = np.random.default_rng(seed)
    replicates = np.column_stack(
        [
            np.nan_to_num(values, nan=np.inf, posinf=np.inf)[
                rng.integers(0, values.size, size=(n_boot, values.size))
            ].min(axis=1)
            for _, values in groups
        ]
    )
    bounds = _log_bounds(b)
    samples = []
    for row in replicates:
        usable = np.isfinite(row) & (row > 0)
        if np.unique(batch[usable]).size >= MIN_BATCH_SIZES:
            samples.append(_fit_log_space(batch[usable], row[usable], bounds))
    return _with_bootstrap(fit, samples, n_boot)


# ------------------------------------------------------------------------------------ pieces


def _log_bounds(b: np.ndarray) -> tuple[float, float]:
    """The search range of log B_noise: `SEARCH_FACTOR` beyond the measured batch sizes."""
    return (
        math.log(float(b.min()) / SEARCH_FACTOR),
        math.log(float(b.max()) * SEARCH_FACTOR),
    )


def _fit_log_space(b: np.ndarray, s: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """Least squares of ``log S = log s_min + log(1 + b_noise / B)`` over (log s_min, log b_noise).

    A grid over log b_noise (with log s_min profiled out) gives the start; `least_squares`
    refines it. Working with logs keeps both parameters positive.
    """
    log_b, log_s = np.log(b), np.log(s)
    low, high = bounds
    grid = np.linspace(low, high, _GRID)
    shape = np.logaddexp(0.0, grid[:, None] - log_b[None, :])
    intercept = (log_s[None, :] - shape).mean(axis=1)
    sse = ((intercept[:, None] + shape - log_s[None, :]) ** 2).sum(axis=1)
    start = int(np.argmin(sse))

    def residuals(p: np.ndarray) -> np.ndarray:
        return p[0] + np.logaddexp(0.0, p[1] - log_b) - log_s

    def jacobian(p: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones_like(log_b), 1.0 / (1.0 + np.exp(log_b - p[1]))])

    result = optimize.least_squares(
        residuals,
        np.array([intercept[start], grid[start]]),
        jac=jacobian,
        bounds=([-np.inf, low], [np.inf, high]),
        method="trf",
    )
    return result.x


def _prepare(batch_sizes: Sequence[float], steps: Sequence[float]) -> tuple[np.ndarray, ...]:
    """Usable batch sizes and steps (finite, positive), and the batch sizes left out."""
    b = np.asarray(batch_sizes, dtype=float).ravel()
    s = np.asarray(steps, dtype=float).ravel()
    if b.shape != s.shape:
        raise ValueError(
            f"batch_sizes and steps must have the same length (got {b.size} and {s.size})"
        )
    if np.any(~(b > 0)):
        raise ValueError(f"batch sizes must be > 0 (got {b.tolist()})")
    usable = np.isfinite(s) & (s > 0)
    return b[usable], s[usable], b[~usable]


def _point_fit(
    b: np.ndarray, s: np.ndarray, excluded: np.ndarray, confidence: float
) -> NoiseScaleFit:
    common = {
        "confidence": confidence,
        "batch_sizes": tuple(as_number(x) for x in b),
        "steps": tuple(float(x) for x in s),
        "excluded": tuple(as_number(x) for x in excluded),
    }
    distinct = np.unique(b).size
    if distinct < MIN_BATCH_SIZES:
        return NoiseScaleFit(
            ok=False,
            reason=f"fewer than {MIN_BATCH_SIZES} batch sizes reached the target ({distinct})",
            **common,
        )
    bounds = _log_bounds(b)
    log_s_min, log_b_noise = _fit_log_space(b, s, bounds)
    s_min, b_noise = math.exp(log_s_min), math.exp(log_b_noise)
    fitted = log_s_min + np.logaddexp(0.0, log_b_noise - np.log(b))
    notes = []
    if excluded.size:
        notes.append(
            "excluded batch sizes that never reached the target: "
            + ", ".join(f"{as_number(x):g}" for x in excluded)
        )
    if log_b_noise - bounds[0] < 1e-6:
        notes.append("B_noise hit the lower search bound: steps barely fall with batch size")
    elif bounds[1] - log_b_noise < 1e-6:
        notes.append("B_noise hit the upper search bound: steps still scale perfectly")
    elif not b.min() <= b_noise <= b.max():
        notes.append(
            f"B_noise={b_noise:.3g} lies outside the measured batch sizes "
            f"[{b.min():g}, {b.max():g}]: it is an extrapolation"
        )
    return NoiseScaleFit(
        ok=True,
        s_min=s_min,
        b_noise=b_noise,
        e_min=s_min * b_noise,
        residual_rms=float(np.sqrt(np.mean((fitted - np.log(s)) ** 2))),
        notes=tuple(notes),
        **common,
    )


def _with_bootstrap(fit: NoiseScaleFit, samples: list[np.ndarray], requested: int) -> NoiseScaleFit:
    """``fit`` with the intervals and replicates of the successful bootstrap ``samples``."""
    if not samples:
        return replace(fit, notes=(*fit.notes, f"all {requested} bootstrap replicates failed"))
    params = np.exp(np.array(samples))
    s_min, b_noise = params[:, 0], params[:, 1]
    notes = fit.notes
    if len(samples) < requested:
        notes = (
            *notes,
            f"{requested - len(samples)} of {requested} bootstrap replicates had fewer than "
            f"{MIN_BATCH_SIZES} batch sizes reaching the target and were dropped",
        )
    return replace(
        fit,
        s_min_ci=percentile_interval(s_min, fit.confidence),
        b_noise_ci=percentile_interval(b_noise, fit.confidence),
        e_min_ci=percentile_interval(s_min * b_noise, fit.confidence),
        n_boot=len(samples),
        notes=notes,
        boot_s_min=tuple(s_min.tolist()),
        boot_b_noise=tuple(b_noise.tolist()),
    )
