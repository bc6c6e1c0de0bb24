"""Models fitted to steps to result: noise scale, scaling regimes, learning-rate power law.

* `fit_noise_scale` fits McCandlish et al. (2018) ``S(B) = S_min (1 + B_noise / B)``;
  equivalently ``E(B) = B S(B) = E_min (1 + B / B_noise)`` with ``E_min = S_min B_noise``.
* `scaling_regimes` splits the measured curve into perfect scaling, diminishing returns and
  maximal data parallelism (Shallue et al. 2018).
* `fit_lr_power_law` fits ``lr* = c B^alpha`` and compares alpha with the linear (1) and
  square-root (0.5) rules.
* `recommend` turns these into a batch size, a learning rate and an expected speed-up for N
  accelerators.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import optimize, stats

from study.analysis.table import BATCH_SIZE, REPLICAS, validate_table

_NAN = math.nan
_GRID = 241
_BOUND_FACTOR = 1e3
"""B_noise is searched within this factor below/above the measured batch sizes."""


def _number(value: float) -> int | float:
    value = float(value)
    return int(value) if value.is_integer() else value


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float] | None:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(samples, [tail, 1.0 - tail])
    return float(low), float(high)


# --------------------------------------------------------------------------------- noise scale


@dataclass(frozen=True)
class NoiseScaleFit:
    """``S(B) = s_min (1 + b_noise / B)`` fitted in log space, with bootstrap intervals.

    Fields: ``ok`` and ``reason`` (why not ok); ``s_min``, ``b_noise``, ``e_min`` (``= s_min *
    b_noise``) and their ``*_ci`` ``(low, high)`` percentile intervals at ``confidence`` (None
    without bootstrap); ``batch_sizes`` and ``steps`` used; ``excluded`` batch sizes (target never
    reached, i.e. infinite steps); ``residual_rms`` in natural-log units; ``n_boot`` successful
    bootstrap replicates; ``notes`` (e.g. B_noise outside the measured range).

    Example: ``fit.steps(256)`` is ``2 * fit.s_min`` when ``fit.b_noise == 256``.
    """

    ok: bool
    reason: str = ""
    s_min: float = _NAN
    b_noise: float = _NAN
    e_min: float = _NAN
    s_min_ci: tuple[float, float] | None = None
    b_noise_ci: tuple[float, float] | None = None
    e_min_ci: tuple[float, float] | None = None
    confidence: float = 0.95
    batch_sizes: tuple[int | float, ...] = ()
    steps: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    residual_rms: float = _NAN
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


def _log_bounds(b: np.ndarray) -> tuple[float, float]:
    return (
        math.log(float(b.min()) / _BOUND_FACTOR),
        math.log(float(b.max()) * _BOUND_FACTOR),
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
        "batch_sizes": tuple(_number(x) for x in b),
        "steps": tuple(float(x) for x in s),
        "excluded": tuple(_number(x) for x in excluded),
    }
    distinct = np.unique(b).size
    if distinct < 3:
        return NoiseScaleFit(
            ok=False,
            reason=f"fewer than 3 batch sizes reached the target ({distinct})",
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
            + ", ".join(f"{_number(x):g}" for x in excluded)
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
    if not samples:
        return replace(fit, notes=(*fit.notes, f"all {requested} bootstrap replicates failed"))
    params = np.exp(np.array(samples))
    s_min, b_noise = params[:, 0], params[:, 1]
    notes = fit.notes
    if len(samples) < requested:
        notes = (
            *notes,
            f"{requested - len(samples)} of {requested} bootstrap replicates had fewer than "
            "3 batch sizes reaching the target and were dropped",
        )
    return replace(
        fit,
        s_min_ci=_interval(s_min, fit.confidence),
        b_noise_ci=_interval(b_noise, fit.confidence),
        e_min_ci=_interval(s_min * b_noise, fit.confidence),
        n_boot=len(samples),
        notes=notes,
        boot_s_min=tuple(s_min.tolist()),
        boot_b_noise=tuple(b_noise.tolist()),
    )


def fit_noise_scale(
    batch_sizes: Sequence[float],
    steps: Sequence[float],
    *,
    n_boot: int = 0,
    confidence: float = 0.95,
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
    confidence: float = 0.95,
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
        if np.unique(batch[usable]).size >= 3:
            samples.append(_fit_log_space(batch[usable], row[usable], bounds))
    return _with_bootstrap(fit, samples, n_boot)


# ------------------------------------------------------------------------------------- regimes


def _per_batch_size(steps_df: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per batch size: the one with fewest steps (a per-strategy table collapses)."""
    validate_table(steps_df, [BATCH_SIZE, column])
    order = [BATCH_SIZE, column]
    if "best_learning_rate" in steps_df.columns:
        order.append("best_learning_rate")
    ranked = steps_df.sort_values(order, kind="stable", na_position="last")
    return ranked.drop_duplicates(subset=BATCH_SIZE, keep="first").reset_index(drop=True)


def scaling_efficiency(
    steps_df: pd.DataFrame, tolerance: float = 0.2, *, column: str = "steps_to_result"
) -> pd.DataFrame:
    """How well each step between consecutive measured batch sizes scaled.

    For consecutive finite batch sizes ``B -> B'`` with ratio ``r = B'/B`` and steps ``S ->
    S'``: ``steps_ratio = S'/S``, ``ideal_steps_ratio = 1/r``, ``efficiency = (S/S') / r``
    (1 is perfect, 0 is no gain), ``speedup_per_doubling = (S/S') ** (log 2 / log r)`` (2 is
    perfect), ``slope`` (log-log slope; -1 is perfect), ``perfect`` (``steps_ratio <=
    ideal_steps_ratio * (1 + tolerance)``) and ``flat`` (``steps_ratio >= 1 - tolerance``).

    Example: 8 -> 16 with steps 1000 -> 520 gives ``efficiency ~= 0.96``, ``perfect == True``.
    """
    per = _per_batch_size(steps_df, column)
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
    tolerance: float = 0.2
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

    def regime(self, batch_size: float) -> str:
        """``"perfect"``, ``"diminishing"`` or ``"maximal"`` (``""`` when not ok)."""
        if not self.ok:
            return ""
        if batch_size <= self.perfect_end:
            return "perfect"
        if self.max_parallel_start is not None and batch_size >= self.max_parallel_start:
            return "maximal"
        return "diminishing"


def scaling_regimes(
    steps_df: pd.DataFrame, tolerance: float = 0.2, *, column: str = "steps_to_result"
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
    per = _per_batch_size(steps_df, column)
    finite = np.isfinite(per[column].to_numpy(dtype=float))
    b = tuple(_number(x) for x in per.loc[finite, BATCH_SIZE])
    excluded = tuple(_number(x) for x in per.loc[~finite, BATCH_SIZE])
    if len(b) < 2:
        return Regimes(
            ok=False,
            reason=f"fewer than 2 batch sizes reached the target ({len(b)})",
            tolerance=tolerance,
            batch_sizes=b,
            excluded=excluded,
        )
    table = scaling_efficiency(steps_df, tolerance, column=column)
    s = per.loc[finite, column].to_numpy(dtype=float)
    perfect = table["perfect"].to_numpy()
    k = len(perfect) if perfect.all() else int(np.argmin(perfect))
    start = next(
        (j for j in range(k, len(s) - 1) if np.all(s[j + 1 :] >= (1.0 - tolerance) * s[j])),
        None,
    )
    return Regimes(
        ok=True,
        tolerance=tolerance,
        batch_sizes=b,
        excluded=excluded,
        perfect_end=b[k],
        max_parallel_start=None if start is None else b[start],
        table=table,
    )


# --------------------------------------------------------------------------- learning-rate law


@dataclass(frozen=True)
class LrPowerLawFit:
    """``lr* = c B^alpha`` fitted by least squares on log-log axes.

    Fields: ``ok``, ``reason``; ``alpha`` and ``alpha_ci`` (at ``confidence``; ``method`` is
    ``"t"`` for the t-based OLS interval or ``"bootstrap"`` for a case bootstrap); ``c``;
    ``r_squared``; ``linear_in_ci`` and ``sqrt_in_ci`` (whether alpha = 1 and alpha = 0.5 lie in
    the interval); ``rule`` (``"linear"``, ``"square-root"``, ``"both"`` (inconclusive) or
    ``"neither"``); ``batch_sizes``, ``learning_rates`` used; ``excluded`` batch sizes (NaN or
    non-positive rate); ``notes``.
    """

    ok: bool
    reason: str = ""
    alpha: float = _NAN
    alpha_ci: tuple[float, float] | None = None
    c: float = _NAN
    r_squared: float = _NAN
    confidence: float = 0.95
    method: str = "t"
    linear_in_ci: bool = False
    sqrt_in_ci: bool = False
    rule: str = ""
    batch_sizes: tuple[int | float, ...] = ()
    learning_rates: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    notes: tuple[str, ...] = ()

    def predict(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``c * B ** alpha`` (NaN when not ok)."""
        return self.c * np.asarray(batch_size, dtype=float) ** self.alpha


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    xm, ym = x.mean(), y.mean()
    slope = float(((x - xm) * (y - ym)).sum() / ((x - xm) ** 2).sum())
    return slope, float(ym - slope * xm)


def fit_lr_power_law(
    batch_sizes: Sequence[float],
    best_lrs: Sequence[float],
    *,
    n_boot: int = 0,
    confidence: float = 0.95,
    seed: int | np.random.Generator | None = 0,
) -> LrPowerLawFit:
    """Fit ``lr* = c B^alpha`` (ordinary least squares of ``log lr`` on ``log B``).

    The interval for alpha is t-based (``n - 2`` degrees of freedom) when ``n_boot == 0``, else a
    percentile interval from ``n_boot`` case-bootstrap replicates (replicates with a single
    distinct batch size are skipped). Points with a NaN or non-positive rate are left out; a best
    rate sitting on the edge of its search range (``lr_on_edge``) biases the fit, so consider
    leaving those out first. Fewer than 3 distinct batch sizes give ``ok=False``.

    Example: rates ``0.001 * B ** 0.5`` give ``alpha == 0.5`` and ``rule == "square-root"``.
    """
    b = np.asarray(batch_sizes, dtype=float).ravel()
    lr = np.asarray(best_lrs, dtype=float).ravel()
    if b.shape != lr.shape:
        raise ValueError(
            f"batch_sizes and best_lrs must have the same length (got {b.size} and {lr.size})"
        )
    usable = np.isfinite(lr) & (lr > 0) & (b > 0)
    common = {
        "confidence": confidence,
        "batch_sizes": tuple(_number(x) for x in b[usable]),
        "learning_rates": tuple(float(x) for x in lr[usable]),
        "excluded": tuple(_number(x) for x in b[~usable]),
    }
    b, lr = b[usable], lr[usable]
    distinct = np.unique(b).size
    if distinct < 3:
        return LrPowerLawFit(
            ok=False,
            reason=f"fewer than 3 batch sizes with a best learning rate ({distinct})",
            **common,
        )
    x, y = np.log(b), np.log(lr)
    alpha, log_c = _slope(x, y)
    residuals = y - (log_c + alpha * x)
    total = ((y - y.mean()) ** 2).sum()
    r_squared = 1.0 - float((residuals**2).sum() / total) if total > 0 else 1.0
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        slopes = []
        for idx in rng.integers(0, x.size, size=(n_boot, x.size)):
            if np.unique(x[idx]).size >= 2:
                slopes.append(_slope(x[idx], y[idx])[0])
        ci, method = _interval(np.array(slopes), confidence), "bootstrap"
    else:
        dof = x.size - 2
        se = math.sqrt((residuals**2).sum() / dof / ((x - x.mean()) ** 2).sum()) if dof else 0.0
        half = float(stats.t.ppf((1.0 + confidence) / 2.0, dof)) * se if dof else math.inf
        ci, method = (alpha - half, alpha + half), "t"
    slack = 1e-9
    linear = ci is not None and ci[0] - slack <= 1.0 <= ci[1] + slack
    sqrt = ci is not None and ci[0] - slack <= 0.5 <= ci[1] + slack
    rule = {(True, True): "both", (True, False): "linear", (False, True): "square-root"}.get(
        (linear, sqrt), "neither"
    )
    return LrPowerLawFit(
        ok=True,
        alpha=alpha,
        alpha_ci=ci,
        c=math.exp(log_c),
        r_squared=r_squared,
        method=method,
        linear_in_ci=linear,
        sqrt_in_ci=sqrt,
        rule=rule,
        **common,
    )


# ------------------------------------------------------------------------------ recommendation


@dataclass(frozen=True)
class Recommendation:
    """What to run on ``accelerators`` devices and what to expect.

    Fields: ``ok``, ``reason``; ``accelerators``; ``batch_size`` (global) and
    ``per_device_batch``; ``learning_rate`` with ``lr_source`` (``"measured"`` or
    ``"power law"``) and ``lr_on_edge``; ``regime`` of the chosen batch size; ``base_batch_size``
    (the one-accelerator baseline); ``steps`` and ``base_steps`` (measured steps to result);
    ``step_speedup`` (expected, ``S(base) / S(B)`` from the noise-scale fit) with
    ``step_speedup_ci`` (its bootstrap interval) and ``measured_step_speedup`` (``base_steps /
    steps``); ``time_speedup``, ``time_speedup_ci`` and ``measured_time_speedup`` (the same
    times the per-step time ratio); ``time_source`` (``"throughput"`` or ``"ideal"``);
    ``strategy`` (fastest measured strategy with N replicas, if known); ``notes``.
    """

    ok: bool
    reason: str = ""
    accelerators: int = 1
    batch_size: int | float | None = None
    per_device_batch: float = _NAN
    learning_rate: float = _NAN
    lr_source: str = ""
    lr_on_edge: bool = False
    regime: str = ""
    base_batch_size: int | float | None = None
    steps: float = _NAN
    base_steps: float = _NAN
    step_speedup: float = _NAN
    step_speedup_ci: tuple[float, float] | None = None
    measured_step_speedup: float = _NAN
    time_speedup: float = _NAN
    time_speedup_ci: tuple[float, float] | None = None
    measured_time_speedup: float = _NAN
    time_source: str = ""
    strategy: str | None = None
    notes: tuple[str, ...] = ()


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


def _time_factor(
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


def _choose_batch(
    batches: Sequence[float], accelerators: int, limit: float
) -> tuple[float | None, list[str]]:
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


def recommend(
    steps_df: pd.DataFrame,
    fit: NoiseScaleFit,
    throughput_df: pd.DataFrame | None = None,
    accelerators: int = 1,
    base_batch: int | None = None,
    *,
    lr_fit: LrPowerLawFit | None = None,
    tolerance: float = 0.2,
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
      batch size, on one accelerator): ``S(base) / S(B)`` from ``fit``, with the bootstrap
      interval of that ratio as the uncertainty band; the measured ratio is reported too.
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
    per = _per_batch_size(steps_df, "steps_to_result")
    per = per[np.isfinite(per["steps_to_result"].to_numpy(dtype=float))].set_index(BATCH_SIZE)
    measured = ", ".join(f"{x:g}" for x in per.index)

    def refuse(reason: str) -> Recommendation:
        return Recommendation(ok=False, reason=reason, accelerators=accelerators)

    if len(per) < 3:
        return refuse(f"fewer than 3 batch sizes reached the target ({len(per)})")
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
    learning_rate, lr_source = float(row.get("best_learning_rate", _NAN)), "measured"
    if not math.isfinite(learning_rate) and lr_fit is not None and lr_fit.ok:
        learning_rate, lr_source = float(lr_fit.predict(chosen)), "power law"
    lr_on_edge = bool(row.get("lr_on_edge", False))
    if lr_on_edge:
        notes.append("the best learning rate sits on the edge of its search range")

    base_steps, steps = float(per.loc[base, "steps_to_result"]), float(row["steps_to_result"])
    predicted = fit.predict_steps(np.array([base, chosen], dtype=float))
    step_speedup = float(predicted[0] / predicted[1])
    step_ci = None
    if fit.boot_b_noise:
        b_noise = np.asarray(fit.boot_b_noise)
        ratios = (1.0 + b_noise / float(base)) / (1.0 + b_noise / float(chosen))
        step_ci = _interval(ratios, fit.confidence)
    factor, time_source, strategy, time_notes = _time_factor(
        throughput_df, float(base), float(chosen), accelerators
    )
    return Recommendation(
        ok=True,
        accelerators=accelerators,
        batch_size=_number(chosen),
        per_device_batch=float(chosen) / accelerators,
        learning_rate=learning_rate,
        lr_source=lr_source,
        lr_on_edge=lr_on_edge,
        regime=regimes.regime(chosen),
        base_batch_size=_number(base),
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
