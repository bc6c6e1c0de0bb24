"""A fitted model that has seen where trials ran: its parameters' covariance narrowed by trials
it was not fitted to.

Under the model's normal approximation an observation of log steps at a batch size and rate
narrows the parameters' covariance ``S`` by ``S g g' S / (sigma**2 + g' S g)`` (``g = d mu / d
theta`` there) whatever its value. So a decision made from a fit that lags the ledger (a fit made
ahead, `study.tuners.fit_ahead`, or a kept fit serving a few newer trials, `design_model`) still
counts the newer trials as seen, and does not send the next trial where one already looked.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from study.analysis.surrogate import Surrogate, mean_log_steps_gradient

__all__ = ["narrowed"]


def narrowed(surrogate: Surrogate, batch_sizes: np.ndarray, rates: np.ndarray) -> Surrogate:
    """``surrogate`` with its covariance narrowed by one observation at each
    ``(batch_sizes[i], rates[i])`` in turn (rates that are not positive and finite are
    skipped).

    Example: a trial at the batch size and rate where the model's B_noise is least certain
    narrows B_noise's variance; a second one there narrows it less than the first did.
    """
    b = np.asarray(batch_sizes, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_lr = np.log(np.asarray(rates, dtype=float))
    keep = np.isfinite(log_lr) & np.isfinite(b)
    if not keep.any():
        return surrogate
    theta, cov = surrogate.theta, surrogate.covariance
    free = np.flatnonzero(np.diag(cov) > 0)  # as `information_gain` differentiates
    grads = np.zeros((theta.size, int(keep.sum())))
    grads[free] = mean_log_steps_gradient(theta, free, b[keep], log_lr[keep], surrogate.b_ref)
    for grad in grads.T:
        spread = cov @ grad
        cov = cov - np.outer(spread, spread) / (surrogate.sigma**2 + float(grad @ spread))
        cov = (cov + cov.T) / 2
    return replace(surrogate, covariance=cov)
