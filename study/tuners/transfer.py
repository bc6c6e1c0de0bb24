"""Learning-rate transfer between batch sizes: centre a new stratum's search on what the
neighbouring batch sizes found."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The learning-rate search of a stratum centred by transfer spans this factor each way.
WINDOW_FACTOR = 10.0


def transfer_learning_rate(
    neighbours: Sequence[tuple[int, float]], batch_size: int, low: float, high: float
) -> float | None:
    """A learning rate for ``batch_size`` centred on the best rates of other batch sizes.

    Interpolates log(lr) linearly in log(batch) between the nearest measured batch sizes on
    either side; beyond the measured range, extrapolates with the local slope clipped to
    [0, 1] (between "keep the rate" and the linear scaling rule). Clipped to [low, high].

    Example: best rates 0.01 at batch 32 and 0.04 at batch 128 give 0.02 at batch 64.
    """
    points = sorted((b, lr) for b, lr in neighbours if b != batch_size and lr > 0)
    if not points:
        return None
    below = [p for p in points if p[0] < batch_size]
    above = [p for p in points if p[0] > batch_size]
    if below and above:
        (b0, l0), (b1, l1) = below[-1], above[0]
        anchor = below[-1]
        slope = (math.log(l1) - math.log(l0)) / (math.log(b1) - math.log(b0))
    elif len(points) == 1:
        anchor, slope = points[0], 0.0
    else:
        (b0, l0), (b1, l1) = below[-2:] if below else above[:2]
        anchor = below[-1] if below else above[0]
        slope = (math.log(l1) - math.log(l0)) / (math.log(b1) - math.log(b0))
        slope = min(1.0, max(0.0, slope))
    lr = anchor[1] * (batch_size / anchor[0]) ** slope
    return min(high, max(low, lr))


def centred_window(centre: float, low: float, high: float) -> tuple[float, float]:
    """``[centre / WINDOW_FACTOR, centre * WINDOW_FACTOR]`` clipped to ``[low, high]``.

    Example: centre 0.3 in [0.001, 3.0] gives (0.03, 3.0).
    """
    return max(low, centre / WINDOW_FACTOR), min(high, centre * WINDOW_FACTOR)
