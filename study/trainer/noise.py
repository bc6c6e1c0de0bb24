"""The gradient noise scale B_simple = tr(Sigma) / |G|^2 from two batch sizes (pure NumPy).

McCandlish et al. (2018), Appendix A: a gradient averaged over B examples has
``E|G_B|^2 = |G|^2 + tr(Sigma) / B``, so from squared norms measured at a small and a big batch
size the unbiased estimates are

    |G|^2     ~ (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
    tr(Sigma) ~ (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)

Each is noisy (tr(Sigma)'s estimate is often negative for one step), so numerator and
denominator are averaged separately with exponential moving averages over steps and
B_simple is the ratio of the averages. Its 95% interval comes from a moving-block bootstrap of
the ratio of means over the unbiased estimates of the last `WINDOW_STEPS` training steps
(blocks of `BLOCK_STEPS`, which keeps their correlation), scaled to the moving-average
estimate. Batches drawn without replacement within an epoch are negatively correlated over an
epoch, which blocks shorter than an epoch ignore, so the interval errs on the wide side. The
trainer measures ``|G_small|^2`` (per-replica gradients, or two micro-batches on one device,
averaged) and ``|G_big|^2`` (the global gradient) in its compiled step on one step in
``every`` and hands them here.

Example::

    noise = NoiseScale(b_small=16, b_big=32)
    noise.update(g2_small=[4.1, 3.9], g2_big=[2.2, 2.0])
    noise.estimate()  # {"b_simple": ..., "grad_sq": ..., "trace_sigma": ...}
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The moving averages' decay per training step (a memory of about 1,600 steps, whichever
#: share of them is measured); bias-corrected.
STEP_DECAY = 0.99 ** (1 / 16)
#: The keys of an estimate, as logged (``noise/<key>`` in curves and in MLflow).
KEYS: tuple[str, ...] = ("b_simple", "grad_sq", "trace_sigma", "b_simple_low", "b_simple_high")
#: Training steps whose measurements the interval uses (about the averages' memory), the
#: bootstrap's block in training steps, and its resamples.
WINDOW_STEPS, BLOCK_STEPS, RESAMPLES = 3200, 160, 200


def unbiased(
    g2_small: float | np.ndarray, g2_big: float | np.ndarray, b_small: float, b_big: float
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """The unbiased ``(|G|^2, tr(Sigma))`` estimates from squared norms at two batch sizes.

    Raises:
        ValueError: ``b_small`` is not smaller than ``b_big``.
    """
    if not 0 < b_small < b_big:
        raise ValueError(f"need 0 < b_small < b_big (got b_small={b_small}, b_big={b_big})")
    grad_sq = (b_big * g2_big - b_small * g2_small) / (b_big - b_small)
    trace = (g2_small - g2_big) / (1.0 / b_small - 1.0 / b_big)
    return grad_sq, trace


class NoiseScale:
    """Bias-corrected exponential moving averages of ``|G|^2`` and ``tr(Sigma)`` over the
    measured steps, one in ``every`` training steps (the memory and the interval's window are
    the same span of training steps whatever ``every`` is)."""

    def __init__(
        self, b_small: float, b_big: float, decay: float | None = None, every: int = 1
    ) -> None:
        unbiased(0.0, 0.0, b_small, b_big)  # validates the batch sizes
        if every < 1:
            raise ValueError(f"need every >= 1 (got every={every})")
        self.b_small, self.b_big = float(b_small), float(b_big)
        self.decay = STEP_DECAY**every if decay is None else decay
        self.window = max(2, WINDOW_STEPS // every)
        self.block = max(1, BLOCK_STEPS // every)
        self._grad_sq = 0.0
        self._trace = 0.0
        self._weight = 0.0
        self._recent: list[tuple[float, float]] = []
        self.steps = 0

    def update(self, g2_small: Sequence[float], g2_big: Sequence[float]) -> None:
        """Fold in consecutive steps' squared norms (non-finite steps are skipped)."""
        grad_sq, trace = unbiased(
            np.asarray(g2_small, np.float64),
            np.asarray(g2_big, np.float64),
            self.b_small,
            self.b_big,
        )
        for g, t in zip(np.atleast_1d(grad_sq), np.atleast_1d(trace), strict=True):
            if not (math.isfinite(g) and math.isfinite(t)):
                continue
            self._grad_sq = self.decay * self._grad_sq + (1 - self.decay) * g
            self._trace = self.decay * self._trace + (1 - self.decay) * t
            self._weight = self.decay * self._weight + (1 - self.decay)
            self._recent.append((float(g), float(t)))
            self.steps += 1
        del self._recent[: -self.window]

    def estimate(self) -> dict[str, float]:
        """The current ``b_simple``, ``grad_sq``, ``trace_sigma`` and the 95% interval
        ``b_simple_low``..``b_simple_high`` (empty before any step).

        ``b_simple`` is NaN while the averaged ``|G|^2`` is not positive (too few steps); the
        interval is NaN with fewer than two blocks of steps.
        """
        if not self.steps:
            return {}
        grad_sq, trace = self._grad_sq / self._weight, self._trace / self._weight
        b_simple = trace / grad_sq if grad_sq > 0 else math.nan
        low, high = self._interval(b_simple)
        return {
            "b_simple": b_simple,
            "grad_sq": grad_sq,
            "trace_sigma": trace,
            "b_simple_low": low,
            "b_simple_high": high,
        }

    def _interval(self, b_simple: float) -> tuple[float, float]:
        recent = np.asarray(self._recent, np.float64)
        blocks = len(recent) // self.block
        if blocks < 2 or not math.isfinite(b_simple):
            return math.nan, math.nan
        recent = recent[-blocks * self.block :].reshape(blocks, self.block, 2).sum(axis=1)
        centre = recent[:, 1].sum() / recent[:, 0].sum()
        rng = np.random.default_rng(self.steps)  # reproducible for a trial
        picks = recent[rng.integers(0, blocks, size=(RESAMPLES, blocks))].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = picks[:, 1] / picks[:, 0]
        ratios = np.where(picks[:, 0] > 0, ratios, np.inf)
        if not (math.isfinite(centre) and centre > 0):
            return math.nan, math.nan
        low, high = np.quantile(ratios, [0.025, 0.975], method="inverted_cdf")  # inf stays inf
        return b_simple * float(low) / centre, b_simple * float(high) / centre
