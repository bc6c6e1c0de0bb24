"""What the trials of one batch size share: the spread of the best learning rate and of S(B)
between batch sizes, beyond what each batch size's own trials say.

The model of every trial (`study.analysis.surrogate`) reads ``log lr*(B)`` as a smooth curve
and ``log S(B)`` as McCandlish et al.'s curve with a knee. A real study's batch sizes scatter
about both: the best rates of the MNIST-1D MLP grid grow like B up to 256 and flatten above at
a cliff, and each batch size pins its own optimum far more tightly than the curve through all of
them passes it. No per-trial correction sees that (every trial of a batch size shares it); a
random effect per batch size does. `between_batch_covariance` reads it as a random-effects
meta-analysis of the batch sizes:

1. per batch size ``g`` that reached the target, the offset ``eta_g`` of the curve there that
   its trials alone prefer (every other parameter held at the fit) and its standard error
   ``se_g``, from the profile of its log-likelihood (where it has risen by 1/2, so a cliff that
   is not a parabola is read as it is);
2. the between-batch variance ``tau^2`` of those offsets by DerSimonian and Laird's moment
   estimator for a regression on the curve's ``k`` parameters (``Q`` the weighted sum of
   squares over ``G - k`` degrees of freedom);
3. the covariance the curve's parameters have when every batch size carries ``tau^2`` on top of
   ``se_g^2``, ``(X' W* X)^-1`` with ``W* = 1 / (se^2 + tau^2)`` (``X`` the curve's Jacobian
   at the batch sizes), less the one without it, ``(X' W X)^-1``: what the between-batch spread
   adds. It is 0 when the batch sizes agree with the curve (``tau^2 = 0``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from study.analysis.likelihood import (
    CENSORED,
    Trials,
    log_best_lr,
    log_steps_curve,
    trial_log_likelihoods,
)
from study.analysis.parameters import Param

#: The offsets profiled, in log units either side of the fit (1% of e apart).
_OFFSETS = np.linspace(-3.0, 3.0, 601)

#: Each component: the parameter whose shift moves the curve by the same offset at every batch
#: size, and the curve itself (rows of parameters x batch sizes).
_CURVES: dict[str, tuple[Param, Callable[[np.ndarray, np.ndarray, float], np.ndarray]]] = {
    "best_lr": (Param.LR_LEVEL, lambda t, b, ref: log_best_lr(t, b, ref)),
    "steps": (Param.LOG_S_MIN, lambda t, b, ref: log_steps_curve(t, b)),
}
COMPONENTS = tuple(_CURVES)


def batch_offsets(
    data: Trials, theta: np.ndarray, component: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The batch sizes that reached the target, each one's preferred offset of the
    ``component`` curve (`COMPONENTS`) and its standard error (``inf`` where the profile does not
    rise by 1/2 within 3 log units on both sides)."""
    shift, _ = _CURVES[component]
    sizes = np.unique(data.b[data.kind != CENSORED])
    thetas = np.repeat(theta[None, :], _OFFSETS.size, axis=0)
    thetas[:, shift] += _OFFSETS
    per_trial = trial_log_likelihoods(thetas, data)  # offsets x trials
    index = np.searchsorted(sizes, data.b)
    known = np.isin(data.b, sizes)
    profile = np.zeros((_OFFSETS.size, sizes.size))
    np.add.at(profile.T, index[known], -per_trial[:, known].T)  # negative log-likelihoods
    best = np.argmin(profile, axis=0)
    eta = _OFFSETS[best]
    se = np.array([_half_width(profile[:, g], best[g]) for g in range(sizes.size)])
    return sizes, eta, se


def between_batch_covariance(
    data: Trials, theta: np.ndarray, free: list[int], component: str
) -> tuple[np.ndarray, float]:
    """The covariance the between-batch spread of ``component`` adds to the ``free`` parameters
    (see the module), and that spread ``tau`` (0 when the batch sizes agree with the curve)."""
    _, curve = _CURVES[component]
    sizes, eta, se = batch_offsets(data, theta, component)
    out = np.zeros((len(free), len(free)))
    usable = np.isfinite(se) & (se > 0)
    x = _jacobian(curve, theta, free, sizes[usable], data.b_ref)
    columns = np.flatnonzero(np.any(np.abs(x) > 1e-9, axis=0))
    g, k = int(usable.sum()), columns.size
    if k == 0 or g <= k:
        return out, 0.0
    x, eta, var = x[:, columns], eta[usable], se[usable] ** 2
    w = 1.0 / var
    fixed = np.linalg.pinv((x.T * w) @ x)
    q = float(np.sum(w * eta**2))
    hat = (x * w[:, None]) @ fixed @ (x.T * w)
    trace = float(np.sum(w) - np.trace(hat))
    tau2 = max(0.0, (q - (g - k)) / trace) if trace > 0 else 0.0
    if tau2 == 0.0:
        return out, 0.0
    w_star = 1.0 / (var + tau2)
    spread = np.linalg.pinv((x.T * w_star) @ x) - fixed
    out[np.ix_(columns, columns)] = 0.5 * (spread + spread.T)
    return out, float(np.sqrt(tau2))


def _half_width(profile: np.ndarray, best: int) -> float:
    """Half the width of the offsets where ``profile`` is within 1/2 of its minimum."""
    level = profile[best] + 0.5
    above = profile > level
    left = np.flatnonzero(above[:best])
    right = np.flatnonzero(above[best:])
    if left.size == 0 or right.size == 0:
        return float("inf")
    lo, hi = _crossing(profile, left[-1], level), _crossing(profile, best + right[0] - 1, level)
    return max(0.5 * (hi - lo), 0.5 * float(_OFFSETS[1] - _OFFSETS[0]))


def _crossing(profile: np.ndarray, i: int, level: float) -> float:
    """Where ``profile`` crosses ``level`` between offsets ``i`` and ``i + 1``."""
    a, b = profile[i], profile[i + 1]
    t = 0.5 if b == a else (level - a) / (b - a)
    return float(_OFFSETS[i] + t * (_OFFSETS[i + 1] - _OFFSETS[i]))


def _jacobian(
    curve: Callable[[np.ndarray, np.ndarray, float], np.ndarray],
    theta: np.ndarray,
    free: list[int],
    sizes: np.ndarray,
    b_ref: float,
) -> np.ndarray:
    """``d curve(B_g) / d theta_j`` (batch sizes x free parameters), central differences."""
    h = np.array([1e-5 * max(1.0, abs(theta[i])) for i in free])
    points = np.repeat(theta[None, :], 2 * len(free), axis=0)
    for j, i in enumerate(free):
        points[2 * j, i] += h[j]
        points[2 * j + 1, i] -= h[j]
    values = curve(points, sizes, b_ref)
    return ((values[0::2] - values[1::2]) / (2.0 * h[:, None])).T
