"""The likelihood of every trial under the model of `study.analysis.surrogate`.

The model's mean log steps to target at ``(B, lr)`` (`mean_log_steps`) is

    ``log S(B) + g(log lr - log lr*(B))``,

* ``S(B) = S_min (1 + (B_noise / B) ** q) ** (1 / q)``: McCandlish et al.'s curve when the
  knee sharpness ``q`` is 1; a larger ``q`` keeps perfect scaling longer and turns to
  ``S_min`` more abruptly (``q -> inf``: ``max(S_min, E_min / B)``). For every ``q`` the curve
  follows ``S_min`` at large batch sizes and ``E_min / B`` at small ones, so ``B_noise`` stays
  the crossing of the two asymptotes and ``E_min = S_min B_noise``;
* ``log lr*(B) = level + alpha x + beta x**2``, ``x = log(B / B_ref)``;
* ``g(u)``: a hyperbola below the best rate (``c u**2`` near it, a line of slope ``s`` far
  below) and ``k u**2`` above it.

A trial's log steps scatter around that mean with standard deviation ``sigma``: normally
(``tau = 0``), or as a Student-t of ``1 / tau`` degrees of freedom (``tau`` up to 0.4, i.e. at
least 2.5 degrees of freedom) and scale ``sigma sqrt(1 - 2 tau)``, whose heavy tails let a few
lucky or unlucky trials pull the curve less. Each trial is an exact observation, a bracket
``(previous evaluation, steps]`` or censored (``T > N``), as `Trials` reads them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from study.analysis.crossings import PREVIOUS_STEP
from study.analysis.fitting import MIN_BATCH_SIZES, value_and_gradient
from study.analysis.parameters import PARAMS, Param
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE

MIN_REACHED = 6
"""The fewest trials that reached the target the model is fitted to (censored ones come on top:
at least ``len(PARAMS) + 2`` trials in all)."""

MIN_TRIALS = len(PARAMS) + 2
"""The fewest trials in all the model is fitted to (`MIN_REACHED` of them reaching the target,
over at least `MIN_BATCH_SIZES` batch sizes)."""

LAST_STEP = "last_step"
"""The column of `censored_trials`: the last step each trial ran."""

OBSERVED, BRACKET, CENSORED = 0, 1, 2
"""How a trial is read: an exact crossing, a bracket between two evaluations, more than N."""

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Trials:
    """The trials as arrays: batch size, log lr, kind, and log step bounds."""

    b: np.ndarray
    log_lr: np.ndarray
    kind: np.ndarray
    low: np.ndarray
    high: np.ndarray
    b_ref: float
    n: int
    n_censored: int
    reason: str = ""

    @functools.cached_property
    def sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct batch sizes, and each trial's index into them (made once: a fit
        evaluates the likelihood a thousand times)."""
        return np.unique(self.b, return_inverse=True)

    @functools.cached_property
    def best_lr_x(self) -> tuple[np.ndarray, np.ndarray]:
        """``log(B / B_ref)``, the best rate's argument, per trial and per distinct batch size
        (rows), each computed as `log_best_lr` computes it."""
        return tuple(
            np.log(np.asarray(b, dtype=float) / self.b_ref)[None, :]
            for b in (self.b, self.sizes[0])
        )

    @functools.cached_property
    def kinds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The indices of the observed, censored and bracketed trials."""
        return tuple(np.flatnonzero(self.kind == k) for k in (OBSERVED, CENSORED, BRACKET))

    @functools.cached_property
    def log_rate_cap(self) -> np.ndarray:
        """Per distinct batch size, the log of `RATE_CAP` times the highest rate tried there."""
        return np.array([self.log_lr[self.b == s].max() for s in self.sizes[0]]) + math.log(
            RATE_CAP
        )

    @classmethod
    def of(cls, trials: pd.DataFrame) -> Trials:
        missing = [c for c in (BATCH_SIZE, LEARNING_RATE, "steps_to_target") if c not in trials]
        if missing:
            raise ValueError(f"the trials need the columns {', '.join(missing)}")
        b = trials[BATCH_SIZE].to_numpy(dtype=float)
        lr = trials[LEARNING_RATE].to_numpy(dtype=float)
        steps = trials["steps_to_target"].to_numpy(dtype=float)
        steps = np.where(np.isnan(steps), np.inf, steps)
        previous = _column(trials, PREVIOUS_STEP)
        last = _column(trials, LAST_STEP)
        diverged = (
            trials[STATE].astype(str).to_numpy() == "diverged"
            if STATE in trials
            else np.zeros(len(trials), bool)
        )
        budget = pd.Series(last).groupby(b).transform("max").to_numpy(dtype=float)
        last = np.where(diverged, budget, last)
        reached = np.isfinite(steps) & (steps > 0)
        usable = np.isfinite(lr) & (lr > 0) & np.isfinite(b) & (b > 0)
        usable &= reached | (np.isfinite(last) & (last > 0))
        b, lr, steps, previous, last, reached = (
            a[usable] for a in (b, lr, steps, previous, last, reached)
        )
        bracket = reached & np.isfinite(previous) & (previous > 0) & (previous < steps - 1)
        kind = np.where(reached, np.where(bracket, BRACKET, OBSERVED), CENSORED)
        high = np.log(np.where(reached, steps, last))
        low = np.where(bracket, np.log(np.where(bracket, previous, 1.0)), high)
        n_censored = int(np.sum(kind == CENSORED))
        reason = ""
        reached_b = np.unique(b[kind != CENSORED])
        if reached_b.size < MIN_BATCH_SIZES:
            reason = (
                f"fewer than {MIN_BATCH_SIZES} batch sizes reached the target ({reached_b.size})"
            )
        elif int(np.sum(kind != CENSORED)) < MIN_REACHED:
            reason = f"too few trials reached the target ({int(np.sum(kind != CENSORED))})"
        elif b.size < MIN_TRIALS:
            reason = f"too few trials ({b.size}; the model has {len(PARAMS)} parameters)"
        b_ref = float(np.exp(np.mean(np.log(np.unique(b))))) if b.size else math.nan
        return cls(b, np.log(lr), kind, low, high, b_ref, int(b.size), n_censored, reason)


def _column(trials: pd.DataFrame, name: str) -> np.ndarray:
    if name not in trials.columns:
        return np.full(len(trials), np.nan)
    return trials[name].to_numpy(dtype=float)


def _columns(thetas: np.ndarray, *params: Param) -> list[np.ndarray]:
    return [thetas[:, p : p + 1] for p in params]


def log_steps_curve(thetas: np.ndarray, batch_sizes: np.ndarray) -> np.ndarray:
    """``log S(B)`` for each row of ``thetas`` (rows x batch sizes)."""
    log_b = np.log(np.asarray(batch_sizes, dtype=float))[None, :]
    log_s_min, log_b_noise, log_knee = _columns(
        thetas, Param.LOG_S_MIN, Param.LOG_B_NOISE, Param.LOG_KNEE
    )
    q = np.exp(log_knee)
    return log_s_min + np.logaddexp(0.0, q * (log_b_noise - log_b)) / q


#: The largest ``log S(B)`` turned into steps: a parameter draw far out in a tail (an S_min of
#: e^800 steps) stays finite, so ratios of steps stay numbers instead of inf / inf.
LOG_STEPS_MAX = 700.0


def steps_curve(theta: np.ndarray, batch_sizes: np.ndarray) -> np.ndarray:
    """``S(B)`` for each row of ``theta`` (draws x batch sizes), at most ``e**LOG_STEPS_MAX``."""
    log_steps = log_steps_curve(np.atleast_2d(theta), batch_sizes)
    return np.exp(np.minimum(log_steps, LOG_STEPS_MAX))


def log_best_lr(theta: np.ndarray, batch_sizes: np.ndarray, b_ref: float) -> np.ndarray:
    """``log lr*(B)`` for each row of ``theta`` (draws x batch sizes)."""
    x = np.log(np.asarray(batch_sizes, dtype=float) / b_ref)[None, :]
    level, alpha, beta = _columns(np.atleast_2d(theta), Param.LR_LEVEL, Param.ALPHA, Param.BETA)
    return level + alpha * x + beta * x**2


def mean_log_steps(
    theta: np.ndarray, b: np.ndarray, log_lr: np.ndarray, b_ref: float
) -> np.ndarray:
    """The model's mean log steps at each (batch size, log learning rate) for parameters
    ``theta`` (one vector, or one per row: then one row of means per parameter vector)."""
    theta = np.asarray(theta, dtype=float)
    out = _mean_log_steps(np.atleast_2d(theta), np.asarray(b, float), log_lr, b_ref)
    return out[0] if theta.ndim == 1 else out


def mean_log_steps_gradient(
    theta: np.ndarray,
    params: Sequence[int],
    b: np.ndarray,
    log_lr: np.ndarray,
    b_ref: float,
    step: float = 1e-4,
) -> np.ndarray:
    """The gradient of the model's mean log steps at each (batch size, log learning rate) in
    the parameters ``params`` of the vector ``theta``, by central differences of relative size
    ``step`` (rows: parameters, columns: points)."""
    theta = np.asarray(theta, dtype=float)
    h = np.array([step * max(1.0, abs(theta[i])) for i in params])
    points = np.repeat(theta[None, :], 2 * len(params), axis=0)
    for k, i in enumerate(params):
        points[2 * k, i] += h[k]
        points[2 * k + 1, i] -= h[k]
    means = _mean_log_steps(points, np.asarray(b, float), np.asarray(log_lr, float), b_ref)
    return (means[0::2] - means[1::2]) / (2.0 * h[:, None])


def _mean_log_steps(
    thetas: np.ndarray,
    b: np.ndarray,
    log_lr: np.ndarray,
    b_ref: float,
    sizes: tuple[np.ndarray, np.ndarray] | None = None,
    best: np.ndarray | None = None,
) -> np.ndarray:
    """The mean log steps (rows: ``thetas``, columns: trials); ``best``: the best log rate at
    each trial's batch size, when known (`capped_log_likelihoods` makes it from the trials'
    cached ``log(B / B_ref)``: the same numbers)."""
    log_c, log_slope, log_k = _columns(thetas, Param.LOG_C_LOW, Param.LOG_SLOPE_LOW, Param.LOG_K)
    if best is None:
        best = log_best_lr(thetas, b, b_ref)
    u = log_lr - best
    # A parameter draw far in a tail can make the penalty overflow: inf log steps is what such
    # a draw means (the target out of reach there), not an error.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        slope, k = np.exp(log_slope), np.exp(log_k)
        w = slope / (2.0 * np.exp(log_c))
        below = slope * w * (np.sqrt(1.0 + (np.minimum(u, 0.0) / w) ** 2) - 1.0)
        penalty = np.where(u < 0, below, k * u * u)
    return _log_steps_at(thetas, b, sizes) + penalty


def _log_steps_at(
    thetas: np.ndarray, b: np.ndarray, sizes: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """``log S(b_i)`` for each row of ``thetas`` and trial ``i`` (the curve per distinct size;
    ``sizes``: ``np.unique(b, return_inverse=True)`` when known)."""
    distinct, index = np.unique(b, return_inverse=True) if sizes is None else sizes
    return log_steps_curve(thetas, distinct)[:, index]


RATE_CAP = 2.0
"""The best rate the model may read at a measured batch size is at most this many times the
highest rate tried there. Past the rates tried the data say only that steps still fell towards
the highest one; a power law in B let free would read a best rate of 15 where 0.08 was the
highest tried at batch 4096 (the MNIST-1D MLP example), steps far below any measured, and
B_noise 60,600 where the dense grid reads perfect scaling to 256. With trials spread around the
best rate (the benchmarks' studies) the cap does not bind and no answer moves."""

RATE_CAP_SCALE = 0.02
"""How steeply the fit is pushed back below `RATE_CAP` (log units: 2% past it costs 1/2)."""


def rate_cap_penalty(
    thetas: np.ndarray, data: Trials, best: np.ndarray | None = None
) -> np.ndarray:
    """For each parameter vector (row), the squared excess of ``log lr*(B)`` over `RATE_CAP`
    times the highest rate tried at each measured batch size, halved and scaled (``best``:
    ``log lr*`` at the distinct batch sizes, when known)."""
    if best is None:
        best = log_best_lr(np.atleast_2d(thetas), data.sizes[0], data.b_ref)
    over = best - data.log_rate_cap
    return 0.5 * np.sum(np.square(np.maximum(over, 0.0) / RATE_CAP_SCALE), axis=1)


def capped_log_likelihoods(thetas: np.ndarray, data: Trials) -> np.ndarray:
    """`log_likelihoods` less `rate_cap_penalty`: what the fit maximises (the best rates at the
    distinct batch sizes made once for both)."""
    thetas = np.atleast_2d(thetas)
    level, alpha, beta = _columns(thetas, Param.LR_LEVEL, Param.ALPHA, Param.BETA)
    best = [level + alpha * x + beta * x**2 for x in data.best_lr_x]
    trials = trial_log_likelihoods(thetas, data, best=best[0])
    return np.sum(trials, axis=1) - rate_cap_penalty(thetas, data, best[1])


def log_likelihoods(
    thetas: np.ndarray, data: Trials, offsets: np.ndarray | None = None
) -> np.ndarray:
    """The log-likelihood of every trial, summed, for each parameter vector (row) of
    ``thetas``; ``offsets`` (one per trial, or one row per vector) shift the mean log steps."""
    return np.sum(trial_log_likelihoods(thetas, data, offsets), axis=1)


def trial_log_likelihoods(
    thetas: np.ndarray,
    data: Trials,
    offsets: np.ndarray | None = None,
    best: np.ndarray | None = None,
) -> np.ndarray:
    """The log-likelihood of each trial (rows: parameter vectors, columns: trials); ``best``:
    as `_mean_log_steps` takes it."""
    mu = _mean_log_steps(thetas, data.b, data.log_lr, data.b_ref, data.sizes, best)
    if offsets is not None:
        mu = mu + offsets
    (log_sigma,), (tau,) = (c.T for c in _columns(thetas, Param.LOG_SIGMA, Param.TAIL))
    tau = np.clip(tau, 0.0, None)[:, None]
    scale = (np.exp(log_sigma) * np.sqrt(1.0 - 2.0 * tau[:, 0]))[:, None]
    z_high = (data.high - mu) / scale
    out = np.empty_like(z_high)
    observed, censored, bracket = data.kinds
    out[:, observed] = _log_density(z_high[:, observed], tau) - np.log(scale)
    out[:, censored] = _log_cdf(-z_high[:, censored], tau)
    if bracket.size:
        z_low = (data.low[bracket] - mu[:, bracket]) / scale
        out[:, bracket] = _log_between(z_low, z_high[:, bracket], tau)
    return out


def _log_density(z: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """The log density of a Student-t with ``1 / tau`` degrees of freedom (normal at 0),
    smooth in ``tau`` down to 0."""
    if not np.any(tau):  # the normal (most fits): the expression below at tau = 0, exactly
        normal = -_LOG_SQRT_2PI - 0.5 * z * z
        return np.broadcast_to(normal, np.broadcast_shapes(normal.shape, np.shape(tau)))
    x = z * z * tau
    small = x < 1e-8
    ratio = np.where(
        small, 1.0 - 0.5 * x, np.log1p(np.where(small, 0.0, x)) / np.where(small, 1.0, x)
    )
    return _log_norm(tau) - _LOG_SQRT_2PI - 0.5 * (1.0 + tau) * z * z * ratio


def _log_norm(tau: np.ndarray) -> np.ndarray:
    """``lgamma((nu + 1) / 2) - lgamma(nu / 2) - log(nu / 2) / 2`` for ``nu = 1 / tau``: 0 for
    the normal, its series below ``tau = 1e-3`` (where the exact form loses its digits)."""
    small = tau < 1e-3
    if small.all():
        return -tau / 4.0 + tau**3 / 96.0
    nu = 1.0 / np.where(small, 1.0, tau)
    exact = special.gammaln((nu + 1.0) / 2.0) - special.gammaln(nu / 2.0) - 0.5 * np.log(nu / 2.0)
    return np.where(small, -tau / 4.0 + tau**3 / 96.0, exact)


def _log_cdf(z: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``log P(Z <= z)`` for the Student-t of ``tau`` (normal at 0)."""
    tau = np.broadcast_to(tau, z.shape)
    normal = special.log_ndtr(z)
    heavy = tau > 1e-7
    if not heavy.any():  # the normal fits (most): no Student-t to evaluate
        return normal
    df = 1.0 / np.where(heavy, tau, 1.0)
    t = np.log(np.maximum(special.stdtr(df, z), 1e-300))
    return np.where(heavy, t, normal)


def _log_between(a: np.ndarray, b: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """``log(F(b) - F(a))`` for ``a < b``, stable in both tails."""
    upper = a > 0
    hi = np.where(upper, _log_cdf(-a, tau), _log_cdf(b, tau))
    lo = np.where(upper, _log_cdf(-b, tau), _log_cdf(a, tau))
    return hi + np.log1p(-np.exp(np.minimum(lo - hi, -1e-12)))


def misfit_p_value(data: Trials, theta: np.ndarray, fun: float, levels: int) -> float:
    """p-value of S(B) against free log steps per batch size: offsets on every batch size that
    reached the target (``n`` levels against S(B)'s ``levels``, two or three with the knee:
    ``n - levels`` degrees of freedom), the learning-rate model and the noise held at the fit
    ``theta``, whose negative log-likelihood is ``fun``."""
    sizes = np.unique(data.b[data.kind != CENSORED])
    if sizes.size < levels + 1:
        return math.nan
    index = np.searchsorted(sizes, data.b)
    known = np.isin(data.b, sizes)
    safe = np.minimum(index, sizes.size - 1)

    def nll(deltas: np.ndarray) -> np.ndarray:
        thetas = np.repeat(theta[None, :], len(deltas), axis=0)
        return -log_likelihoods(thetas, data, np.where(known, deltas[:, safe], 0.0))

    result = optimize.minimize(
        lambda d: value_and_gradient(nll, d), np.zeros(sizes.size), jac=True, method="L-BFGS-B"
    )
    gain = max(0.0, 2.0 * (fun - result.fun))
    return float(stats.chi2.sf(gain, df=sizes.size - levels))
