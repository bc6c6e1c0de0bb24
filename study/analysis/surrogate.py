"""One model of every trial: log steps to target over (batch size, learning rate).

The best-per-batch-size fit (`study.analysis.noise_scale`) reads one lucky trial per batch size;
this model reads them all, the trials that never got there included. For trial i at batch size
``B`` and learning rate ``lr``, the crossing step ``T`` follows

    ``log T = log S_min + log(1 + B_noise / B) + g(log lr - log lr*(B)) + sigma z``,  ``z ~ N(0,1)``

* ``S(B) = S_min (1 + B_noise / B)``: McCandlish et al.'s curve at the best learning rate;
* ``log lr*(B) = level + alpha x + beta x**2`` with ``x = log(B / B_ref)`` (``B_ref`` the
  geometric mean of the measured batch sizes): a power law when ``beta == 0``, a curve that
  bends otherwise (with Adam the best rate can fall again above B_noise). The data decide: the
  bend is kept only when a likelihood-ratio test prefers it at 5% (``shape="auto"``);
* ``g(u)`` below the best rate: ``c u**2`` near it, bending to a straight line of slope ``s``
  far below it (``g = s w (sqrt(1 + (u / w)**2) - 1)``, ``w = s / 2c``; with plain SGD steps
  grow like ``1 / lr`` there, ``s = 1``, and the data decide ``c`` and ``s``); ``k u**2``
  above it (steep; diverged trials censor it);
* ``sigma``: the spread of log steps between trials at one point, i.e. seed-to-seed noise and
  the jagged response to the learning rate together (every trial draws its own seed).

Each trial is an observation of ``T``: in ``(previous evaluation, steps to target]`` when it
reached the target (exact steps make that bracket one step wide), and censored, ``T > N``, when
it did not: ``N`` the steps it ran when pruned or stopped by its budget, and the largest step
any trial of its batch size ran when it diverged (it would not have got there within the budget
either). Maximum likelihood (scipy), with the curvature of the log-likelihood for the
parameters' covariance; `Surrogate.draws` samples parameters from it for the intervals of every
answer derived from the model (`study.analysis.answers`).

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from study.analysis.crossings import PREVIOUS_STEP
from study.analysis.fitting import MIN_BATCH_SIZES, hessian, value_and_gradient
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, STATE

PARAMS = (
    "log_s_min", "log_b_noise", "lr_level", "alpha", "beta", "log_c_low", "log_slope_low",
    "log_k", "log_sigma",
)  # fmt: skip
"""The model's parameters, in the order of `Surrogate.theta`."""

SHAPES = ("auto", "power law", "bends")
"""How the best learning rate may depend on the batch size (`fit_surrogate`'s ``shape``)."""

BEND_P_VALUE = 0.05
"""``shape="auto"`` keeps the bend when the likelihood-ratio test's p-value is below this."""

MISFIT_P_VALUE = 0.01
"""S(B) misfits when a model with free steps per batch size beats it at this p-value."""

MIN_REACHED = 6
"""The fewest trials that reached the target the model is fitted to (censored ones come on top:
at least ``len(PARAMS) + 2`` trials in all)."""

LAST_STEP = "last_step"
"""The column of `censored_trials`: the last step each trial ran."""

_B_NOISE_RANGE = 1e3
"""B_noise is searched within this factor below the smallest and above the largest batch size."""

_BOUNDS = {
    "log_c_low": (math.log(1e-3), math.log(1e4)),
    "log_slope_low": (math.log(0.05), math.log(20.0)),
    "log_k": (math.log(1e-3), math.log(30.0)),
    "log_sigma": (math.log(0.01), math.log(3.0)),
    "alpha": (-3.0, 3.0),
    "beta": (-2.0, 2.0),
}


@dataclass(frozen=True)
class Surrogate:
    """A fitted model of log steps to target over (batch size, learning rate).

    Fields: ``ok``, ``reason``; ``theta`` (the estimate, `PARAMS` order) and ``covariance``
    (its inverse curvature; zero rows and columns for fixed parameters); ``shape``
    (``"power law"`` or ``"bends"``) with ``bend_p_value``; ``b_ref``; ``batch_sizes`` (those
    measured, sorted) and ``reached_batch_sizes`` (those where a trial reached the target);
    ``trials``, ``censored``; ``log_likelihood``; ``misfit_p_value`` (S(B) against free steps
    per batch size; NaN when not tested). Properties give the parameters by name.
    """

    ok: bool
    reason: str = ""
    theta: np.ndarray = field(default_factory=lambda: np.full(len(PARAMS), np.nan), repr=False)
    covariance: np.ndarray = field(
        default_factory=lambda: np.zeros((len(PARAMS), len(PARAMS))), repr=False
    )
    shape: str = "power law"
    bend_p_value: float = math.nan
    b_ref: float = math.nan
    batch_sizes: tuple[float, ...] = ()
    reached_batch_sizes: tuple[float, ...] = ()
    trials: int = 0
    censored: int = 0
    log_likelihood: float = math.nan
    misfit_p_value: float = math.nan

    def value(self, name: str) -> float:
        return float(self.theta[PARAMS.index(name)])

    @property
    def s_min(self) -> float:
        return math.exp(self.value("log_s_min"))

    @property
    def b_noise(self) -> float:
        return math.exp(self.value("log_b_noise"))

    @property
    def sigma(self) -> float:
        """The standard deviation of log steps between trials at one point."""
        return math.exp(self.value("log_sigma"))

    @property
    def misfits(self) -> bool:
        return bool(self.misfit_p_value < MISFIT_P_VALUE)

    def steps(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``S(B)``: the median steps to target at the best learning rate."""
        return steps_curve(self.theta[None, :], np.atleast_1d(batch_size))[0]

    def best_lr(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``lr*(B)``."""
        return np.exp(log_best_lr(self.theta[None, :], np.atleast_1d(batch_size), self.b_ref)[0])

    def predict(self, batch_size: float | np.ndarray, lr: float | np.ndarray) -> np.ndarray:
        """The median steps to target of a trial at ``(batch_size, lr)``."""
        b, lr = np.broadcast_arrays(np.asarray(batch_size, float), np.asarray(lr, float))
        return np.exp(
            mean_log_steps(self.theta, b.ravel(), np.log(lr.ravel()), self.b_ref)
        ).reshape(b.shape)

    def draws(self, n: int, rng: np.random.Generator | int = 0) -> np.ndarray:
        """``n`` parameter vectors from the estimate's normal approximation (rows, `PARAMS`)."""
        rng = np.random.default_rng(rng)
        return rng.multivariate_normal(self.theta, self.covariance, size=n, method="eigh")


def steps_curve(theta: np.ndarray, batch_sizes: np.ndarray) -> np.ndarray:
    """``S(B)`` for each row of ``theta`` (draws x batch sizes)."""
    b = np.asarray(batch_sizes, dtype=float)[None, :]
    log_s_min, log_b_noise = theta[:, :1], theta[:, 1:2]
    return np.exp(log_s_min + np.log1p(np.exp(log_b_noise) / b))


def log_best_lr(theta: np.ndarray, batch_sizes: np.ndarray, b_ref: float) -> np.ndarray:
    """``log lr*(B)`` for each row of ``theta`` (draws x batch sizes)."""
    x = np.log(np.asarray(batch_sizes, dtype=float) / b_ref)[None, :]
    return theta[:, 2:3] + theta[:, 3:4] * x + theta[:, 4:5] * x**2


def censored_trials(trials: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``trials`` (from `trial_crossings`) with `LAST_STEP`, the last step each ran in ``table``
    (the measurement table they came from)."""
    from study.analysis.measures import trial_key
    from study.analysis.table import STEP, flatten_table

    key = trial_key(trials)
    last = flatten_table(table).groupby(key, sort=False)[STEP].max().rename(LAST_STEP)
    return trials.merge(last.reset_index(), on=key, how="left")


def fit_surrogate(
    trials: pd.DataFrame, *, shape: str = "auto", misfit_test: bool = True
) -> Surrogate:
    """Fit the model to every trial of ``trials`` (one row per trial, as `censored_trials`).

    Needs ``batch_size``, ``learning_rate``, ``steps_to_target`` (``inf``/NaN when not reached)
    and ``state``; uses `PREVIOUS_STEP` (the evaluation bracket) and `LAST_STEP` (censoring)
    when present (without `LAST_STEP` a trial that did not reach the target says nothing).
    ``misfit_test=False`` skips the test of S(B) against free steps per batch size (NaN).

    Example: trials of a study whose steps follow ``S(B) = 100 (1 + 256 / B)`` near a best rate
    ``0.01 (B / 32) ** 0.5`` give ``b_noise`` near 256 and ``alpha`` near 0.5.
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)} (got {shape!r})")
    data = _Data.of(trials)
    if data.reason:
        return Surrogate(ok=False, reason=data.reason, trials=data.n, censored=data.n_censored)
    power = _fit(data, bend=False)
    chosen, p_bend = power, math.nan
    if shape != "power law":
        bend = _fit(data, bend=True, start=power.x)
        p_bend = float(stats.chi2.sf(max(0.0, 2.0 * (power.fun - bend.fun)), df=1))
        if shape == "bends" or p_bend < BEND_P_VALUE:
            chosen = bend
    bent = chosen is not power
    return Surrogate(
        ok=True,
        theta=chosen.x,
        covariance=_covariance(data, chosen.x, bent),
        shape="bends" if bent else "power law",
        bend_p_value=p_bend,
        b_ref=data.b_ref,
        batch_sizes=tuple(float(b) for b in np.unique(data.b)),
        reached_batch_sizes=tuple(float(b) for b in np.unique(data.b[data.kind != _CENSORED])),
        trials=data.n,
        censored=data.n_censored,
        log_likelihood=-float(chosen.fun),
        misfit_p_value=_misfit(data, chosen) if misfit_test else math.nan,
    )


# ------------------------------------------------------------------------------------ pieces

_OBSERVED, _BRACKET, _CENSORED = 0, 1, 2
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class _Data:
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

    @classmethod
    def of(cls, trials: pd.DataFrame) -> _Data:
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
        kind = np.where(reached, np.where(bracket, _BRACKET, _OBSERVED), _CENSORED)
        high = np.log(np.where(reached, steps, last))
        low = np.where(bracket, np.log(np.where(bracket, previous, 1.0)), high)
        n_censored = int(np.sum(kind == _CENSORED))
        reason = ""
        reached_b = np.unique(b[kind != _CENSORED])
        if reached_b.size < MIN_BATCH_SIZES:
            reason = (
                f"fewer than {MIN_BATCH_SIZES} batch sizes reached the target ({reached_b.size})"
            )
        elif int(np.sum(kind != _CENSORED)) < MIN_REACHED:
            reason = f"too few trials reached the target ({int(np.sum(kind != _CENSORED))})"
        elif b.size < len(PARAMS) + 2:
            reason = f"too few trials ({b.size}; the model has {len(PARAMS)} parameters)"
        b_ref = float(np.exp(np.mean(np.log(np.unique(b))))) if b.size else math.nan
        return cls(b, np.log(lr), kind, low, high, b_ref, int(b.size), n_censored, reason)


def _column(trials: pd.DataFrame, name: str) -> np.ndarray:
    if name not in trials.columns:
        return np.full(len(trials), np.nan)
    return trials[name].to_numpy(dtype=float)


def mean_log_steps(
    theta: np.ndarray, b: np.ndarray, log_lr: np.ndarray, b_ref: float
) -> np.ndarray:
    """The model's mean log steps at each (batch size, log learning rate) for parameters
    ``theta`` (one vector, or one per row: then one row of means per parameter vector)."""
    theta = np.asarray(theta, dtype=float)
    out = _mean_log_steps(np.atleast_2d(theta), b, log_lr, b_ref)
    return out[0] if theta.ndim == 1 else out


def _mean_log_steps(
    thetas: np.ndarray, b: np.ndarray, log_lr: np.ndarray, b_ref: float
) -> np.ndarray:
    log_s_min, log_b_noise, level, alpha, beta, log_c, log_slope, log_k, _ = (
        thetas[:, i : i + 1] for i in range(len(PARAMS))
    )
    x = np.log(b / b_ref)
    u = log_lr - (level + alpha * x + beta * x * x)
    slope, k = np.exp(log_slope), np.exp(log_k)
    w = slope / (2.0 * np.exp(log_c))
    below = slope * w * (np.sqrt(1.0 + (np.minimum(u, 0.0) / w) ** 2) - 1.0)
    penalty = np.where(u < 0, below, k * u * u)
    return log_s_min + np.log1p(np.exp(log_b_noise) / b) + penalty


def _log_likelihoods(
    thetas: np.ndarray, data: _Data, offsets: np.ndarray | None = None
) -> np.ndarray:
    """The log-likelihood of every trial, summed, for each parameter vector (row) of
    ``thetas``; ``offsets`` (one per trial, or one row per vector) shift the mean log steps."""
    mu = _mean_log_steps(thetas, data.b, data.log_lr, data.b_ref)
    if offsets is not None:
        mu = mu + offsets
    log_sigma = thetas[:, -1]
    z_high = (data.high - mu) / np.exp(log_sigma)[:, None]
    observed = data.kind == _OBSERVED
    total = -0.5 * np.sum(z_high[:, observed] ** 2, axis=1)
    total -= int(observed.sum()) * (_LOG_SQRT_2PI + log_sigma)
    censored = data.kind == _CENSORED
    total += np.sum(special.log_ndtr(-z_high[:, censored]), axis=1)
    bracket = data.kind == _BRACKET
    if bracket.any():
        z_low = (data.low[bracket] - mu[:, bracket]) / np.exp(log_sigma)[:, None]
        total += np.sum(_log_between(z_low, z_high[:, bracket]), axis=1)
    return total


def _log_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``log(Phi(b) - Phi(a))`` for ``a < b``, stable in both tails."""
    upper = a > 0
    hi = np.where(upper, special.log_ndtr(-a), special.log_ndtr(b))
    lo = np.where(upper, special.log_ndtr(-b), special.log_ndtr(a))
    return hi + np.log1p(-np.exp(np.minimum(lo - hi, -1e-12)))


def _bounds(data: _Data, bend: bool) -> list[tuple[float, float]]:
    b = data.b
    spread = float(np.max(data.log_lr) - np.min(data.log_lr)) + 5.0
    return [
        (float(np.min(data.high)) - 5.0, float(np.max(data.high)) + 1.0),
        (math.log(b.min() / _B_NOISE_RANGE), math.log(b.max() * _B_NOISE_RANGE)),
        (float(np.min(data.log_lr)) - spread, float(np.max(data.log_lr)) + spread),
        _BOUNDS["alpha"],
        _BOUNDS["beta"] if bend else (0.0, 0.0),
        _BOUNDS["log_c_low"],
        _BOUNDS["log_slope_low"],
        _BOUNDS["log_k"],
        _BOUNDS["log_sigma"],
    ]


def _starts(data: _Data) -> list[np.ndarray]:
    """Starting points: B_noise at several places of the measured range."""
    done = data.kind != _CENSORED
    best = pd.Series(data.high[done]).groupby(data.b[done]).min()
    best_lr = np.median(data.log_lr[done])
    out = []
    level = float(best.min()) - 0.5
    for quantile in (0.1, 0.5, 0.9):
        log_b_noise = float(np.quantile(np.log(np.unique(data.b)), quantile))
        # A smooth optimum (quadratic near it), and a sharp one (a corner, a cliff above it).
        for log_c, log_k in ((-0.7, 0.0), (1.5, 3.0)):
            out.append(np.array([level, log_b_noise, best_lr, 0.5, 0.0, log_c, 0.0, log_k, -1.6]))
    return out


def _fit(data: _Data, *, bend: bool, start: np.ndarray | None = None) -> optimize.OptimizeResult:
    bounds = _bounds(data, bend)
    starts = _starts(data) if start is None else [start]
    best = None
    upper = np.array([hi for _, hi in bounds])

    def objective(t: np.ndarray) -> tuple[float, np.ndarray]:
        return value_and_gradient(lambda p: -_log_likelihoods(p, data), t, upper)

    for x0 in starts:
        x0 = np.clip(x0, [lo for lo, _ in bounds], upper)
        result = optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or result.fun < best.fun:
            best = result
    return best


def _covariance(data: _Data, theta: np.ndarray, bent: bool) -> np.ndarray:
    """The inverse of the negative log-likelihood's Hessian (numerical) over the free
    parameters; parameters at a bound or fixed get zero variance."""
    bounds = _bounds(data, bent)
    free = [i for i, (lo, hi) in enumerate(bounds) if hi > lo and lo + 1e-6 < theta[i] < hi - 1e-6]
    curvature = hessian(lambda points: -_log_likelihoods(points, data), theta, free)
    values, vectors = np.linalg.eigh(curvature)
    values = np.maximum(values, 1e-6 * max(float(values.max()), 1e-12))
    # The small-sample correction of a variance estimated with ``len(free)`` parameters.
    inner = (vectors / values) @ vectors.T * data.n / max(data.n - len(free), 1)
    out = np.zeros((len(PARAMS), len(PARAMS)))
    out[np.ix_(free, free)] = inner
    return out


def _misfit(data: _Data, fit: optimize.OptimizeResult) -> float:
    """p-value of S(B) against free log steps per batch size: offsets on every batch size that
    reached the target (``n`` levels against S(B)'s two, so ``n - 2`` degrees of freedom), the
    learning-rate model and the noise held at the fit."""
    sizes = np.unique(data.b[data.kind != _CENSORED])
    if sizes.size < 3:
        return math.nan
    index = np.searchsorted(sizes, data.b)
    known = np.isin(data.b, sizes)
    safe = np.minimum(index, sizes.size - 1)

    def nll(deltas: np.ndarray) -> np.ndarray:
        thetas = np.repeat(fit.x[None, :], len(deltas), axis=0)
        return -_log_likelihoods(thetas, data, np.where(known, deltas[:, safe], 0.0))

    result = optimize.minimize(
        lambda d: value_and_gradient(nll, d), np.zeros(sizes.size), jac=True, method="L-BFGS-B"
    )
    gain = max(0.0, 2.0 * (fit.fun - result.fun))
    return float(stats.chi2.sf(gain, df=sizes.size - 2))
