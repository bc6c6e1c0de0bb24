"""McCandlish et al. (2018): the noise-scale model of steps to result, with profile intervals.

``S(B) = S_min (1 + B_noise / B)``; equivalently ``E(B) = B S(B) = E_min (1 + B / B_noise)``
with ``E_min = S_min B_noise``. `fit_noise_scale` fits one steps-to-result value per batch size;
`fit_noise_scale_from_trials` takes the best trial of every batch size, placing its crossing
inside its evaluation bracket when the previous evaluation is known (see `trial_crossings`).

The fit is least squares on ``log S``. Its intervals are profile-likelihood intervals: a value of
a quantity is in the interval when the best fit that holds it there has a residual sum of
squares within ``F(1, n - 2)`` of the least one (Bates & Watts 1988, the profile-t interval
of nonlinear regression). They are centred on the fit, so the estimate always lies inside, and
they need no resampling. A bootstrap that resamples a batch size's trials and takes the best
again can only make the best worse, so its intervals sit on one side of the estimate; these do
not. Their coverage is checked by simulation in ``benchmarks/interval_coverage.py``.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import optimize, stats

from study.analysis.crossings import PREVIOUS_STEP, crossing_estimate
from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES, as_number
from study.analysis.seeds import robust_steps
from study.analysis.table import BATCH_SIZE, LEARNING_RATE, validate_table
from study.analysis.threads import one_blas_thread

SEARCH_FACTOR = 1e3
"""B_noise is searched within this factor below the smallest and above the largest measured
batch size (e.g. 8 to 4,096,000 for batch sizes 8 to 4096)."""

PROFILE = "profile likelihood"
"""The ``method`` of a fit with intervals."""

_GRID = 4001
"""Points of the grid over log B_noise that starts the fit and traces its profile (steps of
about 0.005, i.e. 0.5% in B_noise, over the default search range)."""


@dataclass(frozen=True)
class NoiseScaleFit:
    """``S(B) = s_min (1 + b_noise / B)`` fitted in log space, with profile-likelihood intervals.

    Fields: ``ok`` and ``reason`` (why not ok); ``s_min``, ``b_noise``, ``e_min`` (``= s_min *
    b_noise``) and their ``*_ci`` ``(low, high)`` intervals at ``confidence`` (None when
    intervals were not asked for); ``method`` (``"profile likelihood"`` with intervals, else
    ``""``); ``batch_sizes`` and ``steps`` fitted (the best trial's crossing per batch size);
    ``excluded`` batch sizes (target never reached, i.e. infinite steps); ``residual_rms`` in
    natural-log units; ``notes`` (e.g. B_noise outside the measured range).

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
    method: str = ""
    batch_sizes: tuple[int | float, ...] = ()
    steps: tuple[float, ...] = ()
    excluded: tuple[int | float, ...] = ()
    residual_rms: float = math.nan
    notes: tuple[str, ...] = ()

    def predict_steps(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``S(B) = s_min (1 + b_noise / B)`` (NaN when not ok)."""
        b = np.asarray(batch_size, dtype=float)
        return self.s_min * (1.0 + self.b_noise / b)

    def predict_examples(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``E(B) = B S(B) = e_min (1 + B / b_noise)``."""
        return np.asarray(batch_size, dtype=float) * self.predict_steps(batch_size)

    def speedup(self, base: float, chosen: float) -> float:
        """``S(base) / S(chosen)``: how many times fewer steps ``chosen`` needs than ``base``."""
        return float(self.predict_steps(base) / self.predict_steps(chosen))

    def speedup_interval(
        self, base: float, chosen: float, confidence: float | None = None
    ) -> tuple[float, float] | None:
        """The profile interval of ``S(base) / S(chosen)`` (None without intervals).

        Example: with ``b_noise_ci == (100, 400)``, base 8 and chosen 64 the interval runs from
        the ratio at ``B_noise = 100`` to the ratio at 400 (the ratio grows with B_noise).
        """
        profile = self._profile()
        if profile is None:
            return None
        x_base, x_chosen = math.log(base), math.log(chosen)
        low, high = profile.interval(
            self._confidence(confidence),
            lambda beta: _shape(beta, x_base) - _shape(beta, x_chosen),
            level=False,
        )
        with np.errstate(over="ignore", under="ignore"):
            return float(np.exp(low[0])), float(np.exp(high[0]))

    def steps_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise profile interval ``(low, high)`` of ``S(B)``; None without intervals."""
        profile = self._profile()
        if profile is None:
            return None
        x = np.log(np.atleast_1d(np.asarray(batch_size, dtype=float)))
        low, high = profile.interval(
            self._confidence(confidence), lambda beta: _shape(beta[:, None], x[None, :])
        )
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(low), np.exp(high)

    def examples_band(
        self, batch_size: float | np.ndarray, confidence: float | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Pointwise profile interval ``(low, high)`` of ``E(B) = B S(B)``."""
        band = self.steps_band(batch_size, confidence)
        if band is None:
            return None
        b = np.atleast_1d(np.asarray(batch_size, dtype=float))
        return b * band[0], b * band[1]

    def _profile(self) -> _Profile | None:
        if not self.ok or self.method != PROFILE:
            return None
        b = np.asarray(self.batch_sizes, dtype=float)
        return _Profile.trace(b, np.asarray(self.steps, dtype=float), self.b_noise)

    def _confidence(self, confidence: float | None) -> float:
        return self.confidence if confidence is None else confidence


@one_blas_thread
def fit_noise_scale(
    batch_sizes: Sequence[float],
    steps: Sequence[float],
    *,
    intervals: bool = True,
    confidence: float = CONFIDENCE,
) -> NoiseScaleFit:
    """Fit ``S(B) = S_min (1 + B_noise / B)`` to one steps-to-result value per batch size.

    Least squares on ``log S`` (so every batch size weighs the same, relatively), with both
    parameters positive. Batch sizes whose steps are ``inf`` (target never reached), NaN or
    not positive are left out and listed in ``excluded``.

    Args:
        intervals: add the profile intervals at ``confidence`` (False: the point fit alone).

    Example: steps ``200 * (1 + 256 / B)`` at ``B = 8, 16, ..., 4096`` give ``s_min == 200`` and
    ``b_noise == 256``; two batch sizes give ``ok=False``, ``reason="fewer than 3 batch sizes
    reached the target (2)"``.
    """
    b, s, excluded = _prepare(batch_sizes, steps)
    fit = _point_fit(b, s, excluded, confidence)
    if not fit.ok or not intervals:
        return fit
    return _with_intervals(fit)


@one_blas_thread
def fit_noise_scale_from_trials(
    trials: pd.DataFrame,
    *,
    steps_column: str = "steps_to_target",
    previous_column: str = PREVIOUS_STEP,
    intervals: bool = True,
    confidence: float = CONFIDENCE,
) -> NoiseScaleFit:
    """Fit the noise scale to the best trial of every batch size, with profile intervals.

    ``trials`` has one row per trial: ``batch_size`` and ``steps_column`` (``inf`` when the
    trial never reached the target), as from `trial_steps_to_target`. When it also has
    ``previous_column`` (as from `trial_crossings`), each trial's crossing is taken as the
    geometric midpoint of its evaluation bracket (see `crossing_estimate`); otherwise as its
    first hit, which puts ``S_min`` and ``E_min`` up to one evaluation interval high. The fit
    uses the fewest steps per batch size: the best of its trials, which is what steps to
    result measures (with confirmation trials, i.e. points run under several seeds and a
    ``learning_rate`` column, the least median over seeds instead: `study.analysis.seeds`), so ``S_min`` and ``E_min`` are those a search of this size finds (a larger
    search finds slightly fewer steps); ``B_noise`` and speed-ups do not depend on the search
    size as long as every batch size is searched alike.

    Args:
        intervals: add the profile intervals at ``confidence`` (False: the point fit alone).

    Example: ``fit_noise_scale_from_trials(trial_crossings(df, target))``.
    """
    validate_table(trials, [BATCH_SIZE, steps_column])
    previous = trials[previous_column] if previous_column in trials.columns else None
    steps = trials[steps_column].to_numpy(dtype=float)
    crossing = crossing_estimate(
        np.where(np.isnan(steps), np.inf, steps),
        None if previous is None else previous.to_numpy(dtype=float),
    )
    if LEARNING_RATE in trials.columns:
        robust = robust_steps(trials, np.asarray(crossing, dtype=float), [BATCH_SIZE])
        best = pd.Series({key[0]: e.steps for key, e in robust.items()}, dtype=float)
    else:
        best = pd.Series(crossing, index=trials.index).groupby(trials[BATCH_SIZE]).min()
    b, s, excluded = _prepare(best.index.to_numpy(dtype=float), best.to_numpy(dtype=float))
    fit = _point_fit(b, s, excluded, confidence)
    if not fit.ok or not intervals:
        return fit
    return _with_intervals(fit)


# ------------------------------------------------------------------------------------ pieces


def _shape(log_b_noise: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """``log(1 + B_noise / B)`` from logs."""
    return np.logaddexp(0.0, log_b_noise - log_b)


def _log_bounds(b: np.ndarray) -> tuple[float, float]:
    """The search range of log B_noise: `SEARCH_FACTOR` beyond the measured batch sizes."""
    return (
        math.log(float(b.min()) / SEARCH_FACTOR),
        math.log(float(b.max()) * SEARCH_FACTOR),
    )


@dataclass(frozen=True, eq=False)
class _Profile:
    """The fit's residual sum of squares with log B_noise held at each point of a grid.

    For a fixed ``beta = log B_noise`` the model is linear in ``a = log S_min``: the best ``a``
    is the mean of ``log S - log(1 + B_noise / B)``, and the sum of squares grows by ``n (a -
    a_best)**2`` away from it. So every quantity of the form ``a + f(beta)`` (S_min, E_min,
    S at one batch size) or ``f(beta)`` (B_noise, a speed-up) has its profile interval read off
    this one grid.
    """

    log_b: np.ndarray
    log_s: np.ndarray
    beta: np.ndarray
    """Grid points inside the search range, with the least-squares optimum among them."""
    sse: np.ndarray
    optimum: int
    """The index of the least-squares optimum in ``beta``: always inside an interval."""

    @classmethod
    def trace(cls, b: np.ndarray, s: np.ndarray, b_noise: float) -> _Profile:
        low, high = _log_bounds(b)
        best = math.log(b_noise)
        beta = np.union1d(np.linspace(low, high, _GRID), [best])
        log_b, log_s = np.log(b), np.log(s)
        _, sse = _conditional_fit(beta, log_b, log_s)
        return cls(log_b, log_s, beta, sse, int(np.searchsorted(beta, best)))

    def limit(self, confidence: float) -> float:
        """The largest sum of squares inside the interval: ``SSE_min (1 + F / (n - 2))``."""
        dof = self.log_b.size - 2
        quantile = float(stats.f.ppf(confidence, 1, dof))
        return float(self.sse.min()) * (1.0 + quantile / dof)

    def interval(
        self,
        confidence: float,
        shift: Callable[[np.ndarray], np.ndarray],
        *,
        level: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The log-scale interval of ``a + shift(beta)`` (``level``) or of ``shift(beta)``.

        ``shift`` maps the ``k`` values of beta to ``(k,)`` or ``(k, m)`` (m quantities at
        once); the result is two arrays of length 1 or m.
        """
        limit = self.limit(confidence)
        beta = self._inside(limit)
        intercept, sse = _conditional_fit(beta, self.log_b, self.log_s)
        half = np.sqrt(np.maximum(limit - sse, 0.0) / self.log_b.size) if level else 0.0
        centre = intercept if level else np.zeros_like(beta)
        values = np.asarray(shift(beta), dtype=float)
        if values.ndim == 1:
            values = values[:, None]
        low = (centre - half)[:, None] + values
        high = (centre + half)[:, None] + values
        return low.min(axis=0), high.max(axis=0)

    def _inside(self, limit: float) -> np.ndarray:
        """Grid points with a sum of squares within ``limit``, plus the exact edges between."""
        inside = self.sse <= limit
        inside[self.optimum] = True
        edges = [
            optimize.brentq(self._excess, self.beta[i], self.beta[i + 1], args=(limit,))
            for i in np.flatnonzero(inside[:-1] != inside[1:])
            if self._excess(self.beta[i], limit) * self._excess(self.beta[i + 1], limit) < 0
        ]
        return np.concatenate([self.beta[inside], edges])

    def _excess(self, beta: float, limit: float) -> float:
        """The sum of squares at ``beta`` above ``limit``."""
        return float(_conditional_fit(np.array([beta]), self.log_b, self.log_s)[1][0]) - limit


def _conditional_fit(
    beta: np.ndarray, log_b: np.ndarray, log_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each log B_noise in ``beta``: the best log S_min and the residual sum of squares."""
    shape = _shape(beta[:, None], log_b[None, :])
    intercept = (log_s[None, :] - shape).mean(axis=1)
    sse = ((log_s[None, :] - shape - intercept[:, None]) ** 2).sum(axis=1)
    return intercept, sse


def _fit_log_space(b: np.ndarray, s: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """Least squares of ``log S = log s_min + log(1 + b_noise / B)`` over (log s_min, log b_noise).

    A grid over log b_noise (with log s_min profiled out) gives the start; `least_squares`
    refines it. Working with logs keeps both parameters positive.
    """
    log_b, log_s = np.log(b), np.log(s)
    low, high = bounds
    grid = np.linspace(low, high, _GRID)
    intercept, sse = _conditional_fit(grid, log_b, log_s)
    start = int(np.argmin(sse))

    def residuals(p: np.ndarray) -> np.ndarray:
        return p[0] + _shape(p[1], log_b) - log_s

    def jacobian(p: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones_like(log_b), 1.0 / (1.0 + np.exp(log_b - p[1]))])

    result = optimize.least_squares(
        residuals,
        np.array([intercept[start], grid[start]]),
        jac=jacobian,
        bounds=([-np.inf, low], [np.inf, high]),
        method="trf",
    )
    if float(np.sum(result.fun**2)) > float(sse[start]):
        return np.array([intercept[start], grid[start]])
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
    fitted = log_s_min + _shape(log_b_noise, np.log(b))
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


def _with_intervals(fit: NoiseScaleFit) -> NoiseScaleFit:
    """``fit`` with the profile intervals of S_min, B_noise and E_min at its confidence."""
    b = np.asarray(fit.batch_sizes, dtype=float)
    profile = _Profile.trace(b, np.asarray(fit.steps, dtype=float), fit.b_noise)
    level = profile.interval(fit.confidence, np.zeros_like)
    noise = profile.interval(fit.confidence, lambda beta: beta, level=False)
    examples = profile.interval(fit.confidence, lambda beta: beta)

    def ci(bounds: tuple[np.ndarray, np.ndarray], estimate: float) -> tuple[float, float]:
        # Exact arithmetic puts the estimate inside; rounding in exp must not push it out.
        with np.errstate(over="ignore", under="ignore"):
            low, high = float(np.exp(bounds[0][0])), float(np.exp(bounds[1][0]))
        return min(low, estimate), max(high, estimate)

    return replace(
        fit,
        method=PROFILE,
        s_min_ci=ci(level, fit.s_min),
        b_noise_ci=ci(noise, fit.b_noise),
        e_min_ci=ci(examples, fit.e_min),
    )
