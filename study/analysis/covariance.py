"""The covariance of a fitted model's parameters (`study.analysis.surrogate`), from which every
answer's interval is drawn (`study.analysis.answers`).

The likelihood's curvature (model-based), widened per parameter to the misfit-robust sandwich,
raised by what the spread of the best rate and of S(B) between batch sizes adds
(`study.analysis.batch_effects`); parameters on a bound have no variance unless the bound is a
cap (`CAPPED`).
"""

from __future__ import annotations

import math

import numpy as np

from study.analysis.batch_effects import between_batch_covariance
from study.analysis.fitting import hessian
from study.analysis.likelihood import PARAMS, Trials, log_likelihoods, trial_log_likelihoods

__all__ = ["BATCH_EFFECTS", "CAPPED", "at_least", "is_free", "parameter_covariance"]

BATCH_EFFECTS = ("best_lr", "steps")
"""The curves whose spread between batch sizes widens the intervals
(`study.analysis.batch_effects`): the best learning rate's and S(B)'s."""

CAPPED = ("log_knee", "log_c_low")
"""Parameters whose upper bound is a cap, not a limit of what the model means: at q = 8 the
knee is within 9% of a corner (``S(B_noise) = 2 ** (1 / 8) S_min``), and a fit that reaches
it says "at least this sharp", not "exactly this"; so does a curvature below the best rate
on the smooth bottom's cap (`study.analysis.surrogate.SMOOTH_C_LOW`: the test kept it smooth,
the data lean sharper) or on its largest value. Such a parameter keeps the
variance the likelihood's curvature gives it there (a bound of the model, such as
McCandlish's q >= 1, holds it: no variance). Without it, a corner pinned S(B)'s speed-ups
(91.9% simulated coverage of the step speed-up with a knee of q = 3), and a bottom on its cap
the best rate (85-88% in every condition of `benchmarks/answer_coverage.py`)."""

_SIGMA = PARAMS.index("log_sigma")
"""The variance of ``log sigma`` is ``(kurtosis - 1) / (4 n)`` for the trials' scatter: the
model-based covariance takes the kurtosis as a normal's (3), the sandwich estimates it from the
trials themselves, noisily and low with a few dozen of them. A jagged response to the learning
rate makes the scatter lighter-tailed than normal (kurtosis 2.65-2.85 in simulation), so the
model's interval over-covered (96.2-96.8%) and the sandwich's under-covered (93.4-94.0%);
their mean, the kurtosis shrunk halfway to the normal's, covered 95.2-95.8% (500 studies in
each condition of `benchmarks/answer_coverage.py`)."""


def parameter_covariance(
    data: Trials, theta: np.ndarray, bounds: list[tuple[float, float]]
) -> tuple[np.ndarray, int]:
    """The covariance of the parameters ``theta`` fitted to ``data`` within ``bounds`` (one
    ``(low, high)`` per parameter, `PARAMS` order), and the number of free parameters (those
    held, or at a bound that is not a cap of `CAPPED` (`is_free`), get zero variance).

    The model-based covariance (the inverse of the negative log-likelihood's Hessian, with the
    small-sample correction ``n / (n - p)``), each parameter's standard deviation widened to the
    sandwich covariance's ``H^-1 J H^-1`` (``J`` the trials' scores' outer products) where that
    is wider: the two agree when the model holds, and where it misfits (steps that follow S(B)
    or the learning-rate response only roughly) the sandwich is the one that stays honest.
    The noise's spread ``log_sigma`` takes the mean of the two variances instead, narrower or
    wider (`_SIGMA`).
    Then raised, for every combination of the parameters (`at_least`), to the model-based
    covariance plus what the spread of the best rate and of S(B) between batch sizes adds
    (`BATCH_EFFECTS`, `between_batch_covariance`): a misfit shared by all the trials of a batch
    size, which no per-trial correction sees.
    """
    free = [i for i, (lo, hi) in enumerate(bounds) if is_free(i, theta[i], lo, hi)]
    curvature = hessian(lambda points: -log_likelihoods(points, data), theta, free)
    values, vectors = np.linalg.eigh(curvature)
    values = np.maximum(values, 1e-6 * max(float(values.max()), 1e-12))
    inverse = (vectors / values) @ vectors.T
    n, p = data.n, len(free)
    model = inverse * n / max(n - p, 1)
    scores = _scores(data, theta, free)
    sandwich = inverse @ (scores @ scores.T) @ inverse * n / max(n - p, 1)
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
    likelihood's curvature there)."""
    if high <= low:
        return False
    inside = low + 1e-6 < value < high - 1e-6
    return inside or (PARAMS[i] in CAPPED and value >= high - 1e-6)


def at_least(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + (b - a)_+``: the smallest-step covariance at least as large as both ``a`` and
    ``b`` for every linear combination of the parameters (the positive part of ``b - a``)."""
    values, vectors = np.linalg.eigh(0.5 * ((b - a) + (b - a).T))
    return a + (vectors * np.maximum(values, 0.0)) @ vectors.T


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
