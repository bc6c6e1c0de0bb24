"""One model of every trial: log steps to target over (batch size, learning rate).

The best-per-batch-size fit (`study.analysis.noise_scale`) reads one lucky trial per batch size;
this model reads them all, the trials that never got there included. For trial i at batch size
``B`` and learning rate ``lr``, the crossing step ``T`` follows

    ``log T = log S(B) + g(log lr - log lr*(B)) + sigma e``

(`study.analysis.likelihood` has the pieces):

* ``S(B) = S_min (1 + (B_noise / B) ** q) ** (1 / q)``: McCandlish et al.'s curve at the best
  learning rate for ``q = 1``; the knee's sharpness ``q`` is fitted (``knee=True``), as a real
  curve can keep perfect scaling longer and then turn more abruptly (or less). ``B_noise`` is
  the crossing of the asymptotes ``S_min`` and ``E_min / B`` for every ``q``;
* ``log lr*(B) = level + alpha x + beta x**2`` with ``x = log(B / B_ref)`` (``B_ref`` the
  geometric mean of the measured batch sizes): a power law when ``beta == 0``, a curve that
  bends otherwise (with Adam the best rate can fall again above B_noise). The data decide: the
  bend is kept only when a likelihood-ratio test prefers it at 5% (``shape="auto"``);
* ``g(u)`` below the best rate: ``c u**2`` near it, bending to a straight line of slope ``s``
  far below it; ``k u**2`` above it (steep; diverged trials censor it). The bottom is smooth,
  ``c`` at most `SMOOTH_C_LOW`, unless a likelihood-ratio test prefers a sharper one (up to
  `_C_LOW_MAX`) at 5% (`SHARP_P_VALUE`);
* ``e``: the trial noise of unit standard deviation, normal (``noise="normal"``) or a
  Student-t whose tail weight the data decide (``noise="student-t"``: a few lucky trials pull
  the curve less), so ``sigma`` is the spread of log steps between trials at one point
  (seed-to-seed noise and the jagged response to the learning rate together: every trial draws
  its own seed).

Each trial is an observation of ``T``: in ``(previous evaluation, steps to target]`` when it
reached the target (exact steps make that bracket one step wide), and censored, ``T > N``, when
it did not: ``N`` the steps it ran when pruned or stopped by its budget, and the largest step
any trial of its batch size ran when it diverged. Maximum likelihood (scipy), with the curvature
of the log-likelihood for the parameters' covariance, widened to the sandwich covariance where
the trials scatter more than the model says, and to a random effect per batch size where the
batch sizes scatter about the best-rate curve or S(B) more than their trials say
(`study.analysis.covariance`); `Surrogate.draws` samples parameters from it for the intervals
of every answer derived from the model (`study.analysis.answers`): a Student-t of the fit's
residual degrees of freedom (few trials leave few to measure the noise with), mixed with the
fits whose knee is held at either end of its range (`SOFT_PENALTY`, `SHARP_PENALTY`). The tests
of a bend and of a sharp bottom read their likelihood ratios on the same degrees of freedom.

Thin data never raises: the result has ``ok=False`` and a ``reason``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pandas as pd
from scipy import optimize

from study.analysis import descents
from study.analysis.covariance import (
    SHARP_PENALTY,
    SOFT_PENALTY,
    Component,
    is_free,
    parameter_covariance,
    ratio_p_value,
    residual_dof,
    sample_mixture,
)
from study.analysis.likelihood import (
    CENSORED,
    LAST_STEP,
    MIN_REACHED,
    Trials,
    log_best_lr,
    mean_log_steps,
    mean_log_steps_gradient,
    misfit_p_value,
    steps_curve,
)
from study.analysis.parameters import DECLARED, PARAMS, Param, declared, start_vector
from study.analysis.threads import one_blas_thread

__all__ = [
    "B_NOISE_RANGE", "LAST_STEP", "MIN_REACHED", "NOISES", "PARAMS", "SHAPES", "SMOOTH_C_LOW", "Bottom",
    "Component", "Noise", "Param", "Shape", "ShapeChoice", "Surrogate", "censored_trials",
    "fit_surrogate", "log_best_lr", "mean_log_steps", "mean_log_steps_gradient", "steps_curve",
]  # fmt: skip

Noise = Literal["normal", "student-t"]
"""How a trial's log steps scatter around the model (`fit_surrogate`'s ``noise``)."""
Shape = Literal["power law", "bends"]
"""How the fitted best learning rate depends on the batch size (`Surrogate.shape`)."""
ShapeChoice = Literal["auto", "power law", "bends"]
"""What `fit_surrogate`'s ``shape`` asks for: the data decide (``auto``), or one `Shape`."""
Bottom = Literal["smooth", "sharp"]
"""The curvature just below the best rate (`Surrogate.bottom`): within `SMOOTH_C_LOW` or not."""
NOISES: tuple[Noise, ...] = get_args(Noise)
SHAPES: tuple[ShapeChoice, ...] = get_args(ShapeChoice)

BEND_P_VALUE = 0.05
"""``shape="auto"`` keeps the bend when the likelihood-ratio test's p-value is below this."""

SMOOTH_C_LOW = 1.0
"""The largest curvature of log steps just below the best rate of a smooth bottom: 1 costs 1%
more steps 10% below the best rate, 62% at half of it. The dense grids of
`benchmarks/answer_stability.py` read 0.13-0.24 (MNIST-1D MLP, CNN with Adam). A sharper
bottom, a V, is what a few lucky trials draw in a smooth response: in simulation (a smooth
0.7 u**2 and a jagged response on top) such fits read the best rate ~25% low, and their 95%
intervals held it in about a quarter of the studies."""

SHARP_P_VALUE = 0.05
"""The bottom is sharper than `SMOOTH_C_LOW` only when a likelihood-ratio test prefers it at
this p-value."""

MISFIT_P_VALUE = 0.01
"""S(B) misfits when a model with free steps per batch size beats it at this p-value."""

B_NOISE_RANGE = 1e3
"""B_noise is searched within this factor below the smallest and above the largest batch size."""

_C_LOW_MAX = math.exp(declared(Param.LOG_C_LOW).bounds[1])  # type: ignore[index]
"""The largest curvature of log steps just below the best rate a test may keep
(`SHARP_P_VALUE`): 20 costs 25% more steps 10% below it. Training's response is smooth there
(far below, steps grow about as 1 / lr); a sharper bottom pins the best rate where one lucky
trial sits. With a cap of 1e4 and no test, 17% of the fits to a bending best rate read such a
V and their best rate's interval covered 29% of the time (`benchmarks/answer_coverage.py`,
condition C)."""

_KNEE_BOUNDS: tuple[float, float] = declared(Param.LOG_KNEE).bounds  # type: ignore[assignment]


@dataclass(frozen=True)
class Surrogate:
    """A fitted model of log steps to target over (batch size, learning rate).

    Fields: ``ok``, ``reason``; ``theta`` (the estimate, `PARAMS` order) and ``covariance``
    (its inverse curvature; zero rows and columns for fixed parameters); ``shape``
    (``"power law"`` or ``"bends"``) with ``bend_p_value``; ``bottom`` (``"smooth"`` or
    ``"sharp"``: the curvature below the best rate within `SMOOTH_C_LOW`, or beyond it) with
    ``sharp_p_value`` (NaN when the fit's bottom was smooth without the test); ``b_ref``;
    ``batch_sizes`` (those measured, sorted) and ``reached_batch_sizes`` (those where a trial
    reached the target);
    ``trials``, ``censored``; ``free`` (the parameters fitted, not held); ``log_likelihood``;
    ``misfit_p_value`` (S(B) against free steps per batch size; NaN when not tested);
    ``effective_trials`` and ``dof`` (the trials' information in exact observations and what is
    left of it to measure the noise, `study.analysis.covariance.residual_dof`); ``bounds``
    (each parameter's ``(low, high)`` in the fit; draws stay within them); ``knee_held``
    (McCandlish et al.'s curve, the fit with the knee held at q = 1) and ``knee_sharp`` (held
    at q = 8), with their weights (`SOFT_PENALTY`, `SHARP_PENALTY`); None when the fit read
    q = 1 itself or held the knee, ``knee_sharp`` also when it read q = 8.
    Properties give the parameters by name.
    """

    ok: bool
    reason: str = ""
    theta: np.ndarray = field(default_factory=lambda: np.full(len(PARAMS), np.nan), repr=False)
    covariance: np.ndarray = field(
        default_factory=lambda: np.zeros((len(PARAMS), len(PARAMS))), repr=False
    )
    shape: Shape = "power law"
    bend_p_value: float = math.nan
    bottom: Bottom = "smooth"
    sharp_p_value: float = math.nan
    b_ref: float = math.nan
    batch_sizes: tuple[float, ...] = ()
    reached_batch_sizes: tuple[float, ...] = ()
    trials: int = 0
    censored: int = 0
    free: int = 0
    log_likelihood: float = math.nan
    misfit_p_value: float = math.nan
    effective_trials: float = math.nan
    dof: float = math.inf
    bounds: tuple[tuple[float, float], ...] = ()
    knee_held: Component | None = None
    knee_sharp: Component | None = None

    def value(self, name: str | Param) -> float:
        """The estimate of one parameter, by `Param` or name (``"log_b_noise"``)."""
        return float(self.theta[Param.of(name)])

    @property
    def s_min(self) -> float:
        return math.exp(self.value(Param.LOG_S_MIN))

    @property
    def b_noise(self) -> float:
        return math.exp(self.value(Param.LOG_B_NOISE))

    @property
    def knee(self) -> float:
        """The knee's sharpness ``q`` of S(B) (1: McCandlish et al.'s curve)."""
        return math.exp(self.value(Param.LOG_KNEE))

    @property
    def sigma(self) -> float:
        """The standard deviation of log steps between trials at one point."""
        return math.exp(self.value(Param.LOG_SIGMA))

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
        """``n`` parameter vectors (rows, `PARAMS`): `study.analysis.covariance.sample`'s
        Student-t around the estimate, mixed with `knee_held` and `knee_sharp` in their weights'
        share of the draws, within `bounds` (the knee's q from McCandlish et al.'s 1 to a
        corner: beyond them is the approximation's tail, not a curve).

        A weight a rounding away (another CPU's kernels on a flat likelihood) moves a few
        draws, not every one of them (`study.analysis.covariance.sample_mixture`)."""
        parts = [Component(1.0, self.theta, self.covariance, self.dof)]
        held = [c for c in (self.knee_held, self.knee_sharp) if c is not None]
        if held:
            parts = [dataclasses.replace(parts[0], weight=1.0 - sum(c.weight for c in held))]
            parts.extend(held)
        bounds = np.array(self.bounds or [(-math.inf, math.inf)] * len(PARAMS))
        bounds[Param.LOG_KNEE] = np.clip(bounds[Param.LOG_KNEE], *_KNEE_BOUNDS)
        return sample_mixture(parts, n, rng, bounds, project=(Param.LOG_KNEE,))


def censored_trials(trials: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``trials`` (from `trial_crossings`) with `LAST_STEP`, the last step each ran in ``table``
    (the measurement table they came from)."""
    from study.analysis.measures import trial_key
    from study.analysis.table import STEP, flatten_table

    key = trial_key(trials)
    last = flatten_table(table).groupby(key, sort=False)[STEP].max().rename(LAST_STEP)
    return trials.merge(last.reset_index(), on=key, how="left")


@dataclass(frozen=True)
class _Options:
    bend: bool
    knee: bool
    heavy_tails: bool
    smooth: bool = False
    knee_at: float = 0.0  # with ``knee=False``: where the knee is held (log q)


@one_blas_thread
def fit_surrogate(
    trials: pd.DataFrame,
    *,
    shape: ShapeChoice = "auto",
    misfit_test: bool = True,
    knee: bool = True,
    noise: Noise = "normal",
    start: np.ndarray | None = None,
    readings: bool = True,
) -> Surrogate:
    """Fit the model to every trial of ``trials`` (one row per trial, as `censored_trials`).

    Needs ``batch_size``, ``learning_rate``, ``steps_to_target`` (``inf``/NaN when not reached)
    and ``state``; uses ``previous_step`` (the evaluation bracket) and `LAST_STEP` (censoring)
    when present (without `LAST_STEP` a trial that did not reach the target says nothing).
    ``misfit_test=False`` skips the test of S(B) against free steps per batch size (NaN);
    ``knee=False`` holds S(B) at McCandlish et al.'s ``q = 1``; ``noise`` is one of `NOISES`.
    ``start`` (e.g. an earlier fit's ``theta``) is tried besides the usual starting points, so
    the fit can only be as good or better. ``readings=False`` mixes no held knee into the draws
    (for a caller that reads only the estimate and its covariance: the designer).

    Example: trials of a study whose steps follow ``S(B) = 100 (1 + 256 / B)`` near a best rate
    ``0.01 (B / 32) ** 0.5`` give ``b_noise`` near 256 and ``alpha`` near 0.5.
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)} (got {shape!r})")
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {', '.join(NOISES)} (got {noise!r})")
    heavy_tails = noise == "student-t"
    data = Trials.of(trials)
    if data.reason:
        return Surrogate(ok=False, reason=data.reason, trials=data.n, censored=data.n_censored)
    plain = _Options(bend=False, knee=knee, heavy_tails=heavy_tails)
    power = _fit(data, plain, extra=start)
    chosen, options, p_bend, p_sharp = power, plain, math.nan, math.nan
    if shape != "power law":
        bent = _Options(bend=True, knee=knee, heavy_tails=heavy_tails)
        bend = _fit(data, bent, start=power.x)
        p_bend = _test(data, bend.x, bent, power.fun - bend.fun)
        if shape == "bends" or p_bend < BEND_P_VALUE:
            chosen, options = bend, bent
    if chosen.x[Param.LOG_C_LOW] > math.log(SMOOTH_C_LOW) + 1e-6:
        smooth_options = dataclasses.replace(options, smooth=True)
        start = chosen.x.copy()
        start[Param.LOG_C_LOW] = math.log(SMOOTH_C_LOW)
        smooth = _fit(data, smooth_options, start=start)
        p_sharp = _test(data, chosen.x, options, smooth.fun - chosen.fun)
        if p_sharp >= SHARP_P_VALUE:
            chosen, options = smooth, smooth_options
    bounds = _bounds(data, options)
    covariance, free = parameter_covariance(data, chosen.x, bounds)
    n_eff, dof = residual_dof(data, chosen.x, _free(chosen.x, bounds))
    return Surrogate(
        ok=True,
        theta=chosen.x,
        covariance=covariance,
        shape="bends" if options.bend else "power law",
        bend_p_value=p_bend,
        bottom="sharp" if p_sharp < SHARP_P_VALUE else "smooth",
        sharp_p_value=p_sharp,
        b_ref=data.b_ref,
        batch_sizes=tuple(float(b) for b in np.unique(data.b)),
        reached_batch_sizes=tuple(float(b) for b in np.unique(data.b[data.kind != CENSORED])),
        trials=data.n,
        censored=data.n_censored,
        free=free,
        log_likelihood=-float(chosen.fun),
        misfit_p_value=_misfit(data, chosen, options) if misfit_test else math.nan,
        effective_trials=n_eff,
        dof=dof,
        bounds=tuple(bounds),
        **(_knee_readings(data, chosen, options) if readings else {}),
    )


def _free(theta: np.ndarray, bounds: list[tuple[float, float]]) -> list[int]:
    return [i for i, (lo, hi) in enumerate(bounds) if is_free(i, theta[i], lo, hi)]


def _test(data: Trials, larger: np.ndarray, options: _Options, gain: float) -> float:
    """`ratio_p_value` of the larger model, fitted at ``larger`` within ``options``' bounds, over
    the smaller one, whose negative log-likelihood is ``gain`` higher."""
    n_eff, dof = residual_dof(data, larger, _free(larger, _bounds(data, options)))
    return ratio_p_value(2.0 * gain, n_eff, dof)


def _knee_readings(
    data: Trials, chosen: optimize.OptimizeResult, opts: _Options
) -> dict[str, Component | None]:
    """The fit with the knee held at each end of its range, McCandlish et al.'s q = 1
    (``knee_held``) and the sharp end, q = 8 (``knee_sharp``), as components whose weights are
    their likelihoods relative to the fit's times ``exp(-SOFT_PENALTY)`` and
    ``exp(-SHARP_PENALTY)``, shared with the fit (which weighs 1). None when the fit read
    q = 1 (its draws stay on the bound's side, `FLOORED`) or held the knee; no sharp reading
    when the fit read q = 8. Each covariance's sandwich leaves out the curvature's flat
    directions (`parameter_covariance`'s ``pinned``).
    """
    if not opts.knee or chosen.x[Param.LOG_KNEE] <= 1e-6:
        return {}
    ends = {
        "knee_held": (_KNEE_BOUNDS[0], SOFT_PENALTY),
        "knee_sharp": (_KNEE_BOUNDS[1], SHARP_PENALTY),
    }
    if chosen.x[Param.LOG_KNEE] >= _KNEE_BOUNDS[1] - 1e-6:
        del ends["knee_sharp"]
    readings = {}
    for name, (log_q, penalty) in ends.items():
        held_opts = dataclasses.replace(opts, knee=False, knee_at=log_q)
        start = chosen.x.copy()
        start[Param.LOG_KNEE] = log_q
        held = _settled(data, held_opts, _fit(data, held_opts, start=start))
        bounds = _bounds(data, held_opts)
        covariance, _ = parameter_covariance(data, held.x, bounds, pinned=True)
        _, dof = residual_dof(data, held.x, _free(held.x, bounds))
        gain = min(max(0.0, held.fun - chosen.fun) + penalty, 700.0)
        readings[name] = Component(math.exp(-gain), held.x, covariance, dof)
    total = 1.0 + sum(c.weight for c in readings.values())
    return {k: dataclasses.replace(c, weight=c.weight / total) for k, c in readings.items()}


# ------------------------------------------------------------------------------------ pieces


def _bounds(data: Trials, options: _Options) -> list[tuple[float, float]]:
    """Each parameter's ``(low, high)`` in `Param` order: the declared bounds, the data's where
    the declaration leaves them open, a parameter the options hold pinned at its start."""
    lr, high = data.log_lr, data.high
    spread = float(np.max(lr) - np.min(lr)) + 5.0
    out = {d.param: d.bounds for d in DECLARED if d.bounds is not None}
    out[Param.LOG_S_MIN] = (float(np.min(high)) - 5.0, float(np.max(high)) + 1.0)
    b = (math.log(data.b.min() / B_NOISE_RANGE), math.log(data.b.max() * B_NOISE_RANGE))
    out[Param.LOG_B_NOISE] = b
    out[Param.LR_LEVEL] = (float(np.min(lr)) - spread, float(np.max(lr)) + spread)
    if options.smooth:
        out[Param.LOG_C_LOW] = (out[Param.LOG_C_LOW][0], math.log(SMOOTH_C_LOW))
    for held, free in ((Param.BETA, options.bend), (Param.LOG_KNEE, options.knee)):
        out[held] = out[held] if free else (0.0, 0.0)
    if not options.knee:
        out[Param.LOG_KNEE] = (options.knee_at, options.knee_at)
    out[Param.TAIL] = out[Param.TAIL] if options.heavy_tails else (0.0, 0.0)
    return [tuple(map(float, out[p])) for p in Param]


def _starts(data: Trials) -> list[np.ndarray]:
    """Starting points: B_noise at several places of the measured range, each with a smooth
    optimum (quadratic near it) and a sharp one (a corner, a cliff above it)."""
    done = data.kind != CENSORED
    best = pd.Series(data.high[done]).groupby(data.b[done]).min()
    from_data = {
        "log_s_min": float(best.min()) - 0.5,
        "lr_level": float(np.median(data.log_lr[done])),
    }
    out = []
    for quantile in (0.1, 0.5, 0.9):
        log_b_noise = float(np.quantile(np.log(np.unique(data.b)), quantile))
        for log_c, log_k in ((-0.7, 0.0), (1.5, 3.0)):
            out.append(
                start_vector(**from_data, log_b_noise=log_b_noise, log_c_low=log_c, log_k=log_k)
            )
    return out


def _fit(
    data: Trials,
    options: _Options,
    *,
    start: np.ndarray | None = None,
    extra: np.ndarray | None = None,
) -> optimize.OptimizeResult:
    """The best fit within ``options`` from ``start``, else from `_starts` and ``extra``."""
    bounds = _bounds(data, options)
    starts = _starts(data) if start is None else [start]
    if start is None and extra is not None and np.all(np.isfinite(extra)):
        starts.append(np.asarray(extra, dtype=float))
    best = None
    for result in descents.run(data, bounds, starts):
        if best is None or result.fun < best.fun:
            best = result
    return best


def _settled(data: Trials, opts: _Options, fit: optimize.OptimizeResult) -> optimize.OptimizeResult:
    """``fit`` descended again from where it stopped while that gains (at most 3 times): on a
    flat likelihood L-BFGS-B can stop short, at a point that rounding moves."""
    for _ in range(3):
        again = _fit(data, opts, start=fit.x)
        if not again.fun < fit.fun - 1e-9 * max(1.0, abs(fit.fun)):
            break
        fit = again
    return fit


def _misfit(data: Trials, fit: optimize.OptimizeResult, options: _Options) -> float:
    return misfit_p_value(data, fit.x, float(fit.fun), 3 if options.knee else 2)
