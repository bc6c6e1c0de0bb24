"""The covariance of a fitted model's parameters (`study.analysis.surrogate`), from which every
answer's interval is drawn (`study.analysis.answers`).

The likelihood's curvature (model-based), widened per parameter to the misfit-robust sandwich
(each trial read through its leverage, `leverages`), raised by what the spread of the best rate
and of S(B) between batch sizes adds (`study.analysis.batch_effects`); parameters on a bound
have no variance unless the bound is a cap (`CAPPED`, `FLOORED`). `residual_dof` says how many
trials are left to measure the noise once the curve is fitted: with few (a quickstart-size study
leaves 0 to 6) the noise's estimate is itself uncertain, and `sample` reads the covariance as a
Student-t's scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from study.analysis.batch_effects import between_batch_covariance
from study.analysis.fitting import hessian
from study.analysis.likelihood import (
    Trials,
    capped_log_likelihoods,
    mean_log_steps_gradient,
    trial_log_likelihoods,
)
from study.analysis.parameters import PARAMS, Param

__all__ = [
    "BATCH_EFFECTS", "CAPPED", "DOF_FLOOR", "FLOORED", "LEVERAGE_MAX", "SHARP_PENALTY",
    "SOFT_PENALTY", "Component", "at_least",
    "is_free", "leverages", "parameter_covariance", "ratio_p_value", "residual_dof", "sample",
]  # fmt: skip

BATCH_EFFECTS = ("best_lr", "steps")
"""The curves whose spread between batch sizes widens the intervals
(`study.analysis.batch_effects`): the best learning rate's and S(B)'s."""

CAPPED = frozenset({Param.LOG_KNEE, Param.LOG_C_LOW, Param.LOG_K})
"""Parameters whose upper bound is a cap, not a limit of what the model means: at q = 8 the
knee is within 9% of a corner (``S(B_noise) = 2 ** (1 / 8) S_min``), and a fit that reaches
it says "at least this sharp", not "exactly this"; so does a curvature below the best rate
on the smooth bottom's cap (`study.analysis.surrogate.SMOOTH_C_LOW`: the test kept it smooth,
the data lean sharper) or on its largest value, and a curvature above the best rate on its cap
(a cliff: trials pruned or diverged above the best rate say "slower than this", never how much,
so a fit to them puts the best rate just below the first of them). Such a parameter keeps the
variance the likelihood's curvature gives it there (a bound of the model, such as a slope on
its limit, holds it: no variance). Without it, a corner pinned S(B)'s speed-ups (91.9%
simulated coverage of the step speed-up with a knee of q = 3), a bottom on its cap the best
rate (85-88% in every condition of `benchmarks/answer_coverage.py`), and a cliff the best rate
at the quickstart's size (its interval held the truth in 28% of the 9% of fits on the cap)."""

FLOORED = frozenset({Param.LOG_KNEE})
"""Parameters whose lower bound is the softest reading the model allows, not a value the data
pin: a fit with McCandlish's q = 1 says "no softer than that", and the curvature there says how
much sharper the data allow. Such a parameter keeps that variance (its draws stay on the bound's
side, `Surrogate.draws`). Held at q = 1 with no variance, a fit at the quickstart's size to a
truth of q = 3 gave step speed-ups whose interval held the truth in 57% of the 18% of fits that
read q = 1."""

DOF_FLOOR = 1.5
"""The fewest degrees of freedom `sample` gives its Student-t (the fit's residual degrees of
freedom, `residual_dof`, are often 0 to 2 at the quickstart's size, 4 batch sizes x 6 trials
with half of them pruned): a t of 1.5 degrees of freedom has 95% of its mass within 3 times a
normal's 95% interval. The Student-t carries the small-sample uncertainty of the noise alone: the
covariance it scales is the likelihood's curvature with no ``n / (n - p)`` factor on top, which
had counted it twice (at the benchmark's size, 7 batch sizes x 8 trials, every interval of
`benchmarks/answer_coverage.py` held the truth 96-98.5% of the time with the factor, 94.5-96.8%
without). In simulation at the quickstart's size (conditions Q, Q1 and R) a floor of 3 then
left E_min, alpha, sigma and the critical batch size at 90-93%, a floor of 2 sigma and the
critical batch size at 92.6-92.9%; 1.5 puts every answer of Q inside 93-97%."""

LEVERAGE_MAX = 0.5
"""The highest leverage `leverages` reads: a trial's scores grow at most ``sqrt(2)`` times in
the sandwich. The leverages are a first-order reading of a nonlinear, censored fit: on the
shipped MNIST-1D MLP example (80 trials, 9 free parameters of the mean) they summed to 14.7,
three trials at the cap of 0.9, and that cap widened B_noise's interval from 247-550 to
150-992 and moved the recommended rate at batch 256 from 0.198 to 0.0743 (the measured best
there: 0.449); at 0.5, 215-635 and 0.199. At the quickstart's size (400 simulated studies of
condition Q) 0.5 covers alpha, the best rate, the critical batch size and the speed-up
93.8-94.5%, 0.9 94.5-95.5%. Cribari-Neto's HC4 and HC5 cap their corrections likewise."""

SOFT_PENALTY = 1.0
"""The fit with the knee held at McCandlish et al.'s q = 1 weighs its likelihood relative to the
fit's times ``exp(-SOFT_PENALTY)`` in the draws (`study.analysis.surrogate`; the fit weighs 1).
A few batch sizes seldom pin the knee: with McCandlish's curve as the truth, 7 batch sizes read
q above 1.2 in 14% of the studies, whose critical batch sizes held the truth 14-73% of the time
(91% of all studies; with the held fit mixed in, 97%: `benchmarks/answer_coverage.py`,
condition A). The fit's own draws already reach q = 1 (`FLOORED`), so this reading pays one
unit more than its likelihood. By Akaike's weight (answer model 9, two units less) B_noise's and
S_min's intervals held the truth in 97.8% and 97.7% of 1,200 simulated quickstart-size studies
(condition Q); with this, 95.8% and 96.3%, but 86.8% and 85.4% where the truth is q = 1 itself
(condition Q1, 400 studies; 91.8% with Akaike's)."""

SHARP_PENALTY = 0.0
"""The same for the fit with the knee held at its sharp end, q = 8 (a corner within 9%): it
weighs its likelihood relative to the fit's. Where the trials barely pin q (a fit reading
q = 1.1-1.5 whose truth is 3-4, the profile likelihood rising by 0.7-2.3 out to q = 8) the
normal approximation in log q ends near q = 3: without this reading the critical batch size's
interval held the truth in 92.7% of the studies of condition Q, with it 95.1% (the step
speed-up's 93.1% and 96.2%; at the benchmark's size, condition P, 97.0% and 96.6%)."""

_FLAT = 1e-4
"""A direction of the curvature is flat when its eigenvalue is below this share of the largest
(a standard deviation along it 100 times the best-pinned direction's, or more)."""

_SIGMA = Param.LOG_SIGMA
"""The variance of ``log sigma`` is ``(kurtosis - 1) / (4 n)`` for the trials' scatter: the
model-based covariance takes the kurtosis as a normal's (3), the sandwich estimates it from the
trials themselves, noisily and low with a few dozen of them. A jagged response to the learning
rate makes the scatter lighter-tailed than normal (kurtosis 2.65-2.85 in simulation), so the
model's interval over-covered (96.2-96.8%) and the sandwich's under-covered (93.4-94.0%);
their mean, the kurtosis shrunk halfway to the normal's, covered 95.2-95.8% (500 studies in
each condition of `benchmarks/answer_coverage.py`)."""


def parameter_covariance(
    data: Trials, theta: np.ndarray, bounds: list[tuple[float, float]], pinned: bool = False
) -> tuple[np.ndarray, int]:
    """The covariance of the parameters ``theta`` fitted to ``data`` within ``bounds`` (one
    ``(low, high)`` per parameter, `PARAMS` order), and the number of free parameters (those
    held, or at a bound that is not a cap of `CAPPED` (`is_free`), get zero variance).

    The model-based covariance (the inverse of the negative log-likelihood's Hessian: the
    small-sample uncertainty is `sample`'s Student-t, `DOF_FLOOR`), each parameter's standard
    deviation widened to the sandwich covariance's ``H^-1 J H^-1`` (``J`` the trials' scores'
    outer products) where that is wider: the two agree when the model holds, and where it misfits (steps that follow S(B)
    or the learning-rate response only roughly) the sandwich is the one that stays honest.
    Each trial's scores of the mean's parameters are divided by ``sqrt(1 - h)``, ``h`` its
    leverage (`leverages`, HC2): a small study's curve passes close to the few trials that pin
    it, whose raw scores then understate what they carry. At the quickstart's size (400
    simulated studies of condition Q, `benchmarks/answer_coverage.py`) the raw sandwich left
    alpha, the best rate, the critical batch size and the speed-up at 91.8-93.0%; with the
    leverage, 93.8-94.5%.
    The noise's spread ``log_sigma`` takes the mean of the two variances instead, narrower or
    wider (`_SIGMA`).
    Then raised, for every combination of the parameters (`at_least`), to the model-based
    covariance plus what the spread of the best rate and of S(B) between batch sizes adds
    (`BATCH_EFFECTS`, `between_batch_covariance`): a misfit shared by all the trials of a batch
    size, which no per-trial correction sees.

    ``pinned`` leaves the flat directions of the curvature (eigenvalues below `_FLAT` of the
    largest) out of the sandwich: they keep the model-based variance of the floor, and the
    sandwich ``H^-1 J H^-1``, whose bread is singular there, widens only what the curvature
    pins. `study.analysis.surrogate` reads McCandlish et al.'s q = 1 fit so (a fit held on a
    bound, whose learning-rate response often has a curvature on its cap with a flat direction
    beside it): the quickstart's run (seed 0) with the bracketing designer read B_noise 233 with
    the interval 5.19 to 11,900, the held fit's B_noise having a standard deviation of 2.07 in
    log; pinned, 121 to 561. The fit itself keeps its whole sandwich: pinning it too took the
    quickstart-size coverage of the critical batch size to 92.4% and of the speed-up to 92.0%
    (400 simulated studies), pinning the held fit alone moved no answer's coverage by more than
    0.4 points there or at the benchmark's size.
    """
    free = [i for i, (lo, hi) in enumerate(bounds) if is_free(i, theta[i], lo, hi)]
    curvature = hessian(lambda points: -capped_log_likelihoods(points, data), theta, free)
    values, vectors = np.linalg.eigh(curvature)
    flat = values <= _FLAT * max(float(values.max()), 1e-12)
    values = np.maximum(values, 1e-6 * max(float(values.max()), 1e-12))
    inverse = (vectors / values) @ vectors.T
    model = inverse
    scores = _scores(data, theta, free)
    mean = np.array([i not in _NOISE for i in free])
    lift = 1.0 / np.sqrt(1.0 - leverages(data, theta, free, inverse))  # HC2, `leverages`
    scores = np.where(mean[:, None], scores * lift[None, :], scores)
    kept = ~flat if pinned else np.ones(values.size, dtype=bool)  # `pinned`: the flat left out
    bread = (vectors[:, kept] / values[kept]) @ vectors[:, kept].T
    sandwich = bread @ (scores @ scores.T) @ bread
    ratio = np.diag(sandwich) / np.diag(model)
    widen = np.sqrt(np.maximum(1.0, ratio))
    floor = np.ones(len(free))  # the model-based covariance the batch effects are added to
    if _SIGMA in free:
        j = free.index(_SIGMA)
        widen[j] = math.sqrt(0.5 * (1.0 + ratio[j]))
        floor[j] = min(1.0, widen[j])
    cov = model * np.outer(widen, widen)
    for component in BATCH_EFFECTS:
        spread, _ = between_batch_covariance(data, theta, free, component)
        cov = at_least(cov, model * np.outer(floor, floor) + spread)
    out = np.zeros((len(PARAMS), len(PARAMS)))
    out[np.ix_(free, free)] = cov
    return out, len(free)


def is_free(i: int, value: float, low: float, high: float) -> bool:
    """Whether parameter ``i`` has a variance: fitted (``high > low``) and inside its bounds, or
    on a cap of `CAPPED` (the data allow it lower, and say how much lower through the
    likelihood's curvature there) or a floor of `FLOORED` (likewise, higher)."""
    if high <= low:
        return False
    inside = low + 1e-6 < value < high - 1e-6
    capped = i in CAPPED and value >= high - 1e-6
    floored = i in FLOORED and value <= low + 1e-6
    return inside or capped or floored


def leverages(data: Trials, theta: np.ndarray, free: list[int], inverse: np.ndarray) -> np.ndarray:
    """Each trial's leverage on the fitted mean log steps, ``h_i = w_i g_i' V g_i / sigma**2``
    (``g_i`` the gradient of its mean log steps in the free parameters of the mean, ``V``
    their block of ``inverse``, the curvature's inverse over ``free``, and ``w_i`` its
    information in exact observations, `residual_dof`), within ``[0, LEVERAGE_MAX]``.

    The leverages sum to about the number of free parameters of the mean: a trial that alone
    pins one of them (the one exact crossing of a batch size near its best rate) has ``h``
    near 1, its residual near 0 whatever the noise, and a sandwich that reads it raw says
    nothing of that parameter's uncertainty. `parameter_covariance` divides each trial's
    scores by ``sqrt(1 - h_i)`` (MacKinnon and White's HC2, unbiased when the model holds).
    """
    rows = [j for j, i in enumerate(free) if i not in _NOISE]
    if not rows:
        return np.zeros(data.n)
    params = [free[j] for j in rows]
    gradient = mean_log_steps_gradient(theta, params, data.b, data.log_lr, data.b_ref, 1e-5)
    weights = _information_weights(data, theta) * math.exp(-2.0 * theta[_SIGMA])
    block = inverse[np.ix_(rows, rows)]
    values = weights * np.einsum("it,ij,jt->t", gradient, block, gradient)
    return np.clip(np.nan_to_num(values), 0.0, LEVERAGE_MAX)


def residual_dof(data: Trials, theta: np.ndarray, free: list[int]) -> tuple[float, float]:
    """``(n_eff, dof)``: the trials' information on their own mean log steps, counted in exact
    observations (`_information_weights`: 1 for a trial whose crossing is known to the step,
    less for a wide evaluation bracket, less still for one censored near the model's mean, about
    0 for one censored far below it), and what is left of it once the free parameters of the
    mean (every free one but the noise's ``log_sigma`` and ``tail``) are fitted:
    ``dof = n_eff - p``, the ``n - p`` of a linear model's residual degrees of freedom.

    Example: 12 exact trials and 8 free parameters (``log_sigma`` one of them) leave
    ``dof = 12 - 7 = 5``; 20 trials of which 8 were pruned far short of the model's mean leave
    about the same.
    """
    weights = _information_weights(data, theta)
    mean = [i for i in free if i not in _NOISE]
    n_eff = float(np.sum(weights))
    return n_eff, n_eff - len(mean)


def ratio_p_value(ratio: float, n_eff: float, dof: float) -> float:
    """The p-value of a likelihood ratio ``ratio`` (twice the log-likelihood gained by one more
    parameter) when ``n_eff`` trials' worth of information leave ``dof`` degrees of freedom
    (`residual_dof`, of the larger model): the F test the ratio is in a normal linear model,
    ``F = dof (exp(ratio / n_eff) - 1)`` on (1, dof) degrees of freedom; 1 when none are left.

    The chi-square reading is its limit with many trials; with few it rejects far too often (the
    noise, measured on 2 degrees of freedom, reads too small by a factor the ratio grows with):
    in simulation at the quickstart's size it kept a bend of the best rate in 27% of the fits to
    a power law and a sharp bottom in 20% of the fits to a smooth one; read as an F, in 1% and
    none.

    Example: a ratio of 3.84 (chi-square's 5%) from 60 exact trials with 50 left gives 0.075;
    from 10 with 3 left, 0.32.
    """
    if dof <= 0.0 or n_eff <= 0.0:
        return 1.0
    f = dof * math.expm1(max(ratio, 0.0) / n_eff)
    return float(stats.f.sf(f, 1.0, dof))


@dataclass(frozen=True)
class Component:
    """One fit the parameter draws are taken around: its estimate ``theta``, ``covariance``
    and residual degrees of freedom ``dof``, and the share ``weight`` of the draws it gets."""

    weight: float
    theta: np.ndarray = field(repr=False)
    covariance: np.ndarray = field(repr=False)
    dof: float = math.inf


def sample(
    part: Component,
    n: int,
    rng: np.random.Generator,
    bounds: np.ndarray,
    *,
    project: Sequence[int] = (),
) -> np.ndarray:
    """``n`` draws (rows) of a multivariate Student-t of ``max(part.dof, DOF_FLOOR)`` degrees of
    freedom around ``part.theta`` whose scale is ``part.covariance`` (a normal whose covariance
    is scaled by ``dof / chi2(dof)`` per draw: with few trials left to measure the noise its
    estimate is uncertain, and every parameter's spread grows with the noise), within
    ``bounds`` (rows ``(low, high)``).

    A draw beyond the bounds of a parameter of ``project`` is moved onto that bound with the
    other parameters moved as the covariance pairs them with it (the approximation's reading at
    the bound, not the tail's); every parameter is then clipped to its bounds.
    """
    cov = part.covariance
    deviation = rng.standard_normal((n, part.theta.size)) @ square_root(cov)
    dof = max(part.dof, DOF_FLOOR)
    if math.isfinite(dof):  # else a normal
        deviation /= np.sqrt(rng.chisquare(dof, size=n) / dof)[:, None]
    draws = part.theta + deviation
    for i in project:
        if cov[i, i] > 0:
            beyond = np.clip(draws[:, i], *bounds[i]) - draws[:, i]
            draws += np.outer(beyond, cov[:, i] / cov[i, i])
    return np.clip(draws, bounds[:, 0], bounds[:, 1])


def sample_mixture(
    parts: Sequence[Component],
    n: int,
    rng: np.random.Generator | int,
    bounds: np.ndarray,
    *,
    project: Sequence[int] = (),
) -> np.ndarray:
    """``n`` draws (rows) of the mixture of ``parts`` in their weights' shares, each part's as
    `sample` draws it, in random order.

    The shares are rounded by largest remainders (`apportion`), and each part's draws are the
    first of ``n`` drawn from a stream of its own (`streams`), shuffled by another: a weight a
    rounding away moves a few draws from one part to another, and the rest stay as they were.
    (From one stream, a count one different reshuffles every later draw.)"""
    *own, order = streams(rng, len(parts) + 1)
    counts = apportion(n, [p.weight for p in parts])
    draws = [
        sample(p, n, stream, bounds, project=project)[:k]
        for p, k, stream in zip(parts, counts, own)
        if k
    ]
    return np.vstack(draws)[order.permutation(n)]


def apportion(n: int, weights: Sequence[float]) -> list[int]:
    """``n`` split in proportion to ``weights`` (a negative one, rounding's, as 0; not all 0) by
    largest remainders (Hamilton's method): each gets the floor of its share, and the largest
    fractions one more until the counts add up to ``n`` (ties to the first)."""
    weights = np.maximum(np.asarray(weights, float), 0.0)
    shares = n * weights / weights.sum()
    counts = np.floor(shares).astype(int)
    counts[np.argsort(-(shares - counts), kind="stable")[: n - int(counts.sum())]] += 1
    return counts.tolist()


def streams(rng: np.random.Generator | int, k: int) -> list[np.random.Generator]:
    """``k`` independent generators from a seed, or from a generator
    (`numpy.random.Generator.spawn`)."""
    if isinstance(rng, np.random.Generator):
        return rng.spawn(k)
    return [np.random.default_rng(s) for s in np.random.SeedSequence(rng).spawn(k)]


def square_root(cov: np.ndarray) -> np.ndarray:
    """The symmetric square root of the covariance ``cov`` (its negative eigenvalues, rounding's,
    taken as 0): the one root that moves continuously with ``cov``, so that a covariance a few
    roundings away (another CPU's kernels) turns the same normals into nearly the same draws,
    where an eigenvector basis may flip a sign."""
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def at_least(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + (b - a)_+``: the smallest-step covariance at least as large as both ``a`` and
    ``b`` for every linear combination of the parameters (the positive part of ``b - a``)."""
    values, vectors = np.linalg.eigh(0.5 * ((b - a) + (b - a).T))
    return a + (vectors * np.maximum(values, 0.0)) @ vectors.T


_NOISE = frozenset({Param.LOG_SIGMA, Param.TAIL})
"""The parameters of the trials' scatter about the mean (not counted against `residual_dof`)."""


def _information_weights(data: Trials, theta: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """Per trial: the curvature of its log-likelihood in its own mean log steps, times
    ``sigma**2`` (1 for an exact observation under normal noise), within [0, 1]."""
    offsets = np.array([[h], [0.0], [-h]]) * np.ones((1, data.n))
    values = trial_log_likelihoods(np.repeat(theta[None, :], 3, axis=0), data, offsets)
    curvature = -(values[0] - 2.0 * values[1] + values[2]) / h**2
    return np.clip(curvature * math.exp(2.0 * theta[_SIGMA]), 0.0, 1.0)


def _scores(data: Trials, theta: np.ndarray, free: list[int]) -> np.ndarray:
    """Each trial's gradient of its log-likelihood over the ``free`` parameters (central
    differences; rows: parameters, columns: trials)."""
    h = np.array([1e-5 * max(1.0, abs(theta[i])) for i in free])
    points = np.repeat(theta[None, :], 2 * len(free), axis=0)
    for j, i in enumerate(free):
        points[2 * j, i] += h[j]
        points[2 * j + 1, i] -= h[j]
    values = trial_log_likelihoods(points, data)
    return (values[0::2] - values[1::2]) / (2.0 * h[:, None])
