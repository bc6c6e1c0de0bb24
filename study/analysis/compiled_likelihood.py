"""The fit's objective, compiled: the negative capped log-likelihood of normal noise
(`study.analysis.likelihood.capped_log_likelihoods` at ``tau = 0``) and its forward-difference
gradient (`study.analysis.fitting.value_and_gradient`'s steps), in one call.

A fit runs about a thousand evaluations of the objective over its descents. In numpy each one
is some 60 calls on arrays of a few hundred numbers, and numpy's per-call overhead is most of
its cost (about 0.18 ms); compiled with numba, the same arithmetic takes about 15 us. The two
agree to the last digits or so (1e-15 relative): the same formulas, in the same order, with
``log_ndtr`` written out as scipy's (``erfc`` and the asymptotic series far in the tail).

Only normal noise is compiled: a Student-t fit (``noise="student-t"``, the answer's check of
heavy tails) runs the numpy likelihood. numba compiles on first use and caches the machine code
on disk (``cache=True``), so a process loads it in a fraction of a second after the first.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numba import njit

from study.analysis.fitting import FORWARD_STEP
from study.analysis.likelihood import CENSORED, OBSERVED, RATE_CAP_SCALE, Trials
from study.analysis.parameters import PARAMS

__all__ = ["KernelData", "kernel_data", "log_ndtr", "objective", "warm"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)
_EPSILON = 2.220446049250313e-16

#: The trials as the kernel reads them: log of each distinct batch size, ``log(B / B_ref)``
#: per distinct size and per trial, each trial's index into the sizes, log rate, kind, log
#: step bounds, and each size's log rate cap.
KernelData = tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
]


def kernel_data(data: Trials) -> KernelData:
    """``data``'s arrays in the kernel's order and types."""
    sizes, index = data.sizes
    per_trial, per_size = (x[0] for x in data.best_lr_x)
    return (
        np.log(sizes),
        np.ascontiguousarray(per_size, dtype=float),
        np.ascontiguousarray(per_trial, dtype=float),
        np.ascontiguousarray(index, dtype=np.int64),
        np.ascontiguousarray(data.log_lr, dtype=float),
        np.ascontiguousarray(data.kind, dtype=np.int64),
        np.ascontiguousarray(data.low, dtype=float),
        np.ascontiguousarray(data.high, dtype=float),
        np.ascontiguousarray(data.log_rate_cap, dtype=float),
    )


@njit(cache=True, nogil=True)
def log_ndtr(a: float) -> float:
    """``log Phi(a)``, the log of the standard normal's CDF, accurate in both tails."""
    if a > -1.0:
        return math.log1p(-0.5 * math.erfc(a * _SQRT1_2))
    if a > -20.0:
        return math.log(0.5 * math.erfc(-a * _SQRT1_2))
    # The asymptotic series of Phi(a) / phi(a) / (-1 / a) far in the lower tail.
    total, last, term, i = 1.0, 0.0, 1.0, 0
    while abs(total - last) > _EPSILON and i < 100:
        i += 1
        last = total
        term *= -(2 * i - 1) / (a * a)
        total += term
    return -0.5 * a * a - math.log(-a) - _LOG_SQRT_2PI + math.log(total)


@njit(cache=True, nogil=True)
def _log1p_exp(y: float) -> float:
    """``log(1 + e**y)`` as numpy's ``logaddexp(0, y)`` computes it."""
    if y == 0.0:
        return math.log(2.0)
    if y > 0.0:
        return y + math.log1p(math.exp(-y))
    return math.log1p(math.exp(y))


@njit(cache=True, nogil=True)
def _negative_log_likelihood(
    t, log_b, x_size, x_trial, index, log_lr, kind, low, high, cap, curve, cap_scale
):
    """The negative capped log-likelihood at the parameter vector ``t`` (`Param` order)."""
    level, alpha, beta = t[2], t[3], t[4]
    q = math.exp(t[9])
    penalty = 0.0
    for s in range(log_b.size):
        curve[s] = t[0] + _log1p_exp(q * (t[1] - log_b[s])) / q
        over = level + alpha * x_size[s] + beta * x_size[s] ** 2 - cap[s]
        if over > 0.0:
            penalty += (over / cap_scale) ** 2
    slope, k = math.exp(t[6]), math.exp(t[7])
    w = slope / (2.0 * math.exp(t[5]))
    scale = math.exp(t[8])
    log_scale = math.log(scale)
    total = 0.0
    for i in range(index.size):
        u = log_lr[i] - (level + alpha * x_trial[i] + beta * x_trial[i] ** 2)
        if u < 0.0:
            mu = curve[index[i]] + slope * w * (math.sqrt(1.0 + (u / w) ** 2) - 1.0)
        else:
            mu = curve[index[i]] + k * u * u
        z_high = (high[i] - mu) / scale
        if kind[i] == OBSERVED:
            total += -_LOG_SQRT_2PI - 0.5 * z_high * z_high - log_scale
        elif kind[i] == CENSORED:
            total += log_ndtr(-z_high)
        else:
            z_low = (low[i] - mu) / scale
            if z_low > 0.0:
                hi, lo = log_ndtr(-z_low), log_ndtr(-z_high)
            else:
                hi, lo = log_ndtr(z_high), log_ndtr(z_low)
            total += hi + math.log1p(-math.exp(min(lo - hi, -1e-12)))
    return 0.5 * penalty - total


@njit(cache=True, nogil=True)
def _value_and_gradient(
    x, upper, log_b, x_size, x_trial, index, log_lr, kind, low, high, cap, cap_scale
):
    curve = np.empty(log_b.size)
    args = (log_b, x_size, x_trial, index, log_lr, kind, low, high, cap, curve, cap_scale)
    value = _negative_log_likelihood(x, *args)
    gradient = np.empty(x.size)
    point = x.copy()
    for j in range(x.size):
        h = FORWARD_STEP * max(1.0, abs(x[j]))
        if x[j] + h > upper[j]:
            h = -h
        point[j] = x[j] + h
        gradient[j] = (_negative_log_likelihood(point, *args) - value) / h
        point[j] = x[j]
    return value, gradient


def objective(x: np.ndarray, upper: np.ndarray, arrays: KernelData) -> tuple[float, np.ndarray]:
    """The negative capped log-likelihood of normal noise at ``x`` and its forward-difference
    gradient (a step that would pass ``upper`` goes the other way)."""
    value, gradient = _value_and_gradient(
        np.asarray(x, dtype=float), upper, *arrays, RATE_CAP_SCALE
    )
    return float(value), gradient


_warmed = threading.Event()


def warm() -> None:
    """Compile (or load from numba's cache) the kernel now, once per process, so that the
    first fit does not wait for it."""
    if _warmed.is_set():
        return
    one = np.zeros(1)
    data = (one, one, one, np.zeros(1, np.int64), one, np.zeros(1, np.int64), one, one, one)
    objective(np.zeros(len(PARAMS)), np.ones(len(PARAMS)), data)
    _warmed.set()
