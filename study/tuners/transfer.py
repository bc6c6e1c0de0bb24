"""Learning-rate transfer between batch sizes: centre every stratum's search on what the other
batch sizes found.

`search_window` is the learning-rate range a stratum's backends search, recomputed before
every proposal from the best rates found so far: the power law ``lr* = c B^alpha`` fitted to
the other batch sizes (`study.analysis.lr_scaling`), widened by its uncertainty, and kept
around the stratum's own best rate. A best rate is an estimate of the optimum only between
other rates tried (`BestRate`): one at the highest (lowest) rate tried is a bound, so the
window stays open on that side, and a batch size with a single trial says nothing.
`transfer_learning_rate` and `centred_window` are the simpler pieces it is built from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from study.analysis.lr_scaling import fit_lr_power_law

#: The learning-rate search of a stratum centred by transfer spans at most this factor each way.
WINDOW_FACTOR = 10.0
#: A window spans at least this factor each way of what it is built around (best rates found
#: at a fixed seed are uncertain by about this much: the optimum is flat and noisy).
MARGIN = 2.0
#: The extrapolation slope is taken between keeping the rate (0) and the linear rule (1).
SLOPES = (0.0, 1.0)
#: Rates within this factor of each other count as the same rate (a best at the edge).
EDGE = 1.0 + 1e-9


@dataclass(frozen=True)
class BestRate:
    """The best learning rate found at a batch size, and what it rests on: the ``trials`` at
    the study's seed that ran to an outcome, the lowest and highest rate among them (``low``,
    ``high``), and the best's steps to target.

    The optimum may lie beyond a best at the edge of the rates tried (`open_low`,
    `open_high`); a single trial is at both edges and says nothing (`informative`).
    """

    batch_size: int
    learning_rate: float
    trials: int
    low: float
    high: float
    steps: float = math.inf

    @property
    def informative(self) -> bool:
        """Whether other rates were tried too, so the best says where the optimum is."""
        return self.trials >= 2 and self.high > self.low

    @property
    def open_low(self) -> bool:
        """Whether the best is the lowest rate tried (the optimum may lie lower)."""
        return self.learning_rate <= self.low * EDGE or not self.informative

    @property
    def open_high(self) -> bool:
        """Whether the best is the highest rate tried (the optimum may lie higher)."""
        return self.learning_rate * EDGE >= self.high or not self.informative


@dataclass(frozen=True)
class Window:
    """The learning-rate range a stratum is searched over, and why.

    ``centre`` is the predicted best rate (None without knowledge of other batch sizes);
    ``source``: ``range`` (the study's whole range), ``neighbour`` (one other batch size),
    ``power law`` (a slope fitted to two or more), ``interpolated`` (batch sizes on both sides).
    """

    low: float
    high: float
    centre: float | None = None
    source: str = "range"

    @property
    def bounds(self) -> tuple[float, float]:
        return self.low, self.high


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


def search_window(
    neighbours: Sequence[BestRate],
    batch_size: int,
    low: float,
    high: float,
    own: BestRate | None = None,
) -> Window:
    """The learning-rate window of a stratum at ``batch_size``, in the study's ``[low, high]``.

    From ``neighbours``, the best rates of the other batch sizes; those with a single trial
    (not `BestRate.informative`) are left out:

    - none: the whole range;
    - batch sizes on both sides: centred on the log-log interpolation between the nearest
      two, spanning `MARGIN` each way of it;
    - on one side only: extrapolated from the nearest one with the slope ``alpha`` of the power
      law fitted to all of them (clipped to [0, 1]; 0.5 with one neighbour). Since the law may
      bend beyond the measured range, the window spans every slope in `SLOPES` from the
      nearest one, `MARGIN` each way of that;
    - with three or more batch sizes, the window also covers the power law's 95% prediction
      interval at ``batch_size`` (its scatter and the uncertainty of its slope);
    - the window spans at most `WINDOW_FACTOR` each way of its centre, except where a
      neighbour the centre rests on (the nearest on each side) has its best at the edge of the
      rates it tried: its optimum may lie beyond, so on that side the window reaches
      `WINDOW_FACTOR` past the farthest of the rates extrapolated from it (every slope).

    The window always holds ``own``,
    the stratum's own best rate so far: `MARGIN` each way of it, and `WINDOW_FACTOR` on a side
    where it is at the edge of the stratum's rates tried, so the search follows a best at an
    edge. Clipped to ``[low, high]``.

    Example: one neighbour, 0.4 at batch 256 between rates 0.1 and 1.0, gives batch 128 the
    centre 0.4 * 0.5 ** 0.5 = 0.28 and the window 0.2 / 2 to 0.4 * 2 = (0.1, 0.8); were 0.4
    its highest rate tried, the window would reach up to 0.4 * 10 = 3.0 (the range's end).
    """
    usable = {
        n.batch_size: n
        for n in neighbours
        if n.batch_size != batch_size and n.learning_rate > 0 and n.informative
    }
    points = sorted((b, n.learning_rate) for b, n in usable.items())
    if not points:
        return _clipped(Window(low, high), low, high, own)
    below = [p for p in points if p[0] < batch_size]
    above = [p for p in points if p[0] > batch_size]
    fit = fit_lr_power_law([b for b, _ in points], [lr for _, lr in points])
    if below and above:
        centre = transfer_learning_rate(points, batch_size, 0.0, math.inf)
        assert centre is not None
        edges, source = [centre], "interpolated"
        anchors = [usable[below[-1][0]], usable[above[0][0]]]
    else:
        b0, lr0 = below[-1] if below else above[0]
        if fit.ok:
            slope = fit.alpha
        elif len(points) == 2:
            (b1, l1), (b2, l2) = points
            slope = (math.log(l2) - math.log(l1)) / (math.log(b2) - math.log(b1))
        else:
            slope = 0.5
        slope = min(SLOPES[1], max(SLOPES[0], slope))
        ratio = batch_size / b0
        centre = lr0 * ratio**slope
        edges = [lr0 * ratio**s for s in SLOPES]
        source = "neighbour" if len(points) == 1 else "power law"
        anchors = [usable[b0]]
    lo, hi = min(edges) / MARGIN, max(edges) * MARGIN
    interval = fit.prediction_interval(batch_size)
    if interval is not None:
        lo, hi = min(lo, interval[0]), max(hi, interval[1])
    lo, hi = max(lo, centre / WINDOW_FACTOR), min(hi, centre * WINDOW_FACTOR)
    if any(n.open_low for n in anchors):
        lo = min(edges) / WINDOW_FACTOR
    if any(n.open_high for n in anchors):
        hi = max(edges) * WINDOW_FACTOR
    window = Window(lo, hi, min(high, max(low, centre)), source)
    return _clipped(window, low, high, own)


def _clipped(window: Window, low: float, high: float, own: BestRate | None) -> Window:
    """``window`` stretched to hold `MARGIN` each way of the stratum's own best rate (and
    `WINDOW_FACTOR` on a side where that best is at the edge of its rates tried, with two
    trials or more), clipped to the range, and at least `MARGIN` wide each way of its middle
    (so it never collapses on an edge)."""
    lo, hi = window.low, window.high
    if own is not None and own.learning_rate > 0:
        best = own.learning_rate
        lo, hi = min(lo, best / MARGIN), max(hi, best * MARGIN)
        if own.informative and own.open_low:
            lo = min(lo, best / WINDOW_FACTOR)
        if own.informative and own.open_high:
            hi = max(hi, best * WINDOW_FACTOR)
    lo, hi = max(low, lo), min(high, hi)
    if hi / lo < MARGIN**2:
        if lo <= low:
            hi = min(high, low * MARGIN**2)
        else:
            lo = max(low, hi / MARGIN**2)
    return Window(lo, hi, window.centre, window.source)
