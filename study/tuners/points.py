"""No wasted trials: a proposal too close to a point already run or running in its stratum is
drawn again, whichever backend or process made either.

A *point* is what a trial runs: its metaparameters and its seed (``None`` for the study's
seed; confirmation trials run under others). Two points are the same (`same_point`) when their
seeds are equal, their learning rates lie within `LR_TOLERANCE` of each other in log space
(0.5%) and every other metaparameter they both have is equal.

`settle` makes a proposal stick across processes. The ledger's claim serialises slots, not
points, so each trial *reserves* its point in the ledger (`TunerState.reserve`) and then reads the
points of every other running or finished trial of the stratum (`Ledger.points`): if one is
the same, it draws again (the backend's own ``redraw``, a few times, then `nudge`) and reserves
anew. Whoever sees a clash gives way, so two processes that reserved the same point at once
both draw again; at least one of two sees the other (each writes before it reads), so both can
never keep it. After `ROUNDS` rounds the last point is kept (each round moves it away from
every point seen).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from study.config.space import FloatParam
from study.config.study import StudyConfig
from study.ledger import Ledger, Slot

#: Learning rates within this distance in log space are the same (0.5%).
LR_TOLERANCE = 0.005
#: Seed key of a point (None: the study's seed).
SEED = "seed"
#: The backend redraws a clashing proposal at most this many times before it is nudged.
REDRAWS = 4
#: Reserve-and-check rounds before a point is kept as it is.
ROUNDS = 6

Point = Mapping[str, Any]
#: ``redraw(attempt, taken)``: another proposal from the backend (params without the seed).
Redraw = Callable[[int, Sequence[Point]], Mapping[str, Any]]


def point_of(params: Mapping[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The point a trial with ``params`` runs under ``seed`` (None: the study's seed)."""
    return {**{k: v for k, v in params.items() if k != SEED}, SEED: seed}


def same_point(a: Point, b: Point, tolerance: float = LR_TOLERANCE) -> bool:
    """Whether two points are the same trial: equal seeds, learning rates within ``tolerance``
    in log space, every other parameter both have equal.

    Example: lr 0.1000 and 0.1004 (0.4% apart) with equal momentum are the same point; lr 0.1
    and 0.1006 (0.6%) are not, nor are equal rates under seeds None and 1.
    """
    if a.get(SEED) != b.get(SEED):
        return False
    for name in a.keys() & b.keys():
        if name == SEED:
            continue
        x, y = a[name], b[name]
        if name == "learning_rate":
            if not (_positive(x) and _positive(y)):
                return False
            if abs(math.log(x) - math.log(y)) > tolerance:
                return False
        elif not _equal(x, y):
            return False
    return True


def clashes(point: Point, taken: Sequence[Point], tolerance: float = LR_TOLERANCE) -> bool:
    """Whether ``point`` is the same as any of ``taken``."""
    return any(same_point(point, other, tolerance) for other in taken)


class _Taken:
    """``taken`` indexed by log learning rate, for many `clashes` checks against the same
    points: only the points whose rate lies within the tolerance (and those without a positive
    rate) are compared, so a stratum of thousands of trials costs a few comparisons a check.
    The answer is `clashes`'s."""

    def __init__(self, taken: Sequence[Point], tolerance: float = LR_TOLERANCE) -> None:
        self.points, self.tolerance = taken, tolerance
        rated = sorted(
            (math.log(p["learning_rate"]), i)
            for i, p in enumerate(taken)
            if _positive(p.get("learning_rate"))
        )
        self.logs = [x for x, _ in rated]
        self.order = [i for _, i in rated]
        indexed = set(self.order)
        self.unrated = [i for i in range(len(taken)) if i not in indexed]

    def clashes(self, point: Point) -> bool:
        lr = point.get("learning_rate")
        if not _positive(lr):
            return clashes(point, self.points, self.tolerance)
        x, margin = math.log(lr), self.tolerance * (1.0 + 1e-9) + 1e-12
        low = bisect.bisect_left(self.logs, x - margin)
        high = bisect.bisect_right(self.logs, x + margin)
        near = self.order[low:high] + self.unrated
        return any(same_point(point, self.points[i], self.tolerance) for i in near)


def nudge(
    params: Mapping[str, Any],
    seed: int | None,
    taken: Sequence[Point],
    low: float,
    high: float,
    order: int = 0,
) -> dict[str, Any]:
    """``params`` with the learning rate moved just clear of every clashing point: the nearest
    of ``lr * exp(k * 2 * LR_TOLERANCE)``, k = 1, -1, 2, -2, ... (k = -1 first when ``order`` is
    odd) that clashes with none of ``taken`` and lies in ``[low, high]``; ``params`` unchanged
    if no move is needed or none is possible.

    Example: lr 0.1 with 0.1 taken becomes 0.1 * exp(0.01) = 0.10101.
    """
    return _nudge(dict(params), seed, _Taken(taken), low, high, order)


def _nudge(
    current: dict[str, Any], seed: int | None, taken: _Taken, low: float, high: float, order: int
) -> dict[str, Any]:
    if not taken.clashes(point_of(current, seed)):
        return current
    lr = float(current["learning_rate"])
    first = -1 if order % 2 else 1
    steps = max(1, math.ceil(math.log(max(high / low, 1.0 + 1e-9)) / (2 * LR_TOLERANCE)))
    for k in range(1, steps + 1):
        for sign in (first, -first):
            candidate = lr * math.exp(sign * k * 2 * LR_TOLERANCE)
            if not low <= candidate <= high:
                continue
            moved = {**current, "learning_rate": candidate}
            if not taken.clashes(point_of(moved, seed)):
                return moved
    return current


def free(
    params: Mapping[str, Any],
    seed: int | None,
    taken: Sequence[Point],
    redraw: Redraw | None,
    bounds: tuple[float, float],
    order: int = 0,
    redraws: int = REDRAWS,
) -> dict[str, Any]:
    """``params`` if they clash with none of ``taken``; else the first of up to ``redraws``
    redraws that does not; else `nudge` (the learning rate moved just clear)."""
    current, index = dict(params), _Taken(taken)
    if not index.clashes(point_of(current, seed)):
        return current
    for attempt in range(redraws if redraw is not None else 0):
        candidate = dict(redraw(attempt, taken))
        if not index.clashes(point_of(candidate, seed)):
            return candidate
    return _nudge(current, seed, index, bounds[0], bounds[1], order)


def others(ledger: Ledger, slot: Slot) -> list[dict[str, Any]]:
    """The points of every other running or finished trial of the slot's stratum."""
    return [point for number, point in ledger.tuning.points(slot.stratum) if number != slot.number]


def settle(
    ledger: Ledger,
    slot: Slot,
    params: Mapping[str, Any],
    redraw: Redraw | None,
    bounds: tuple[float, float],
    seed: int | None = None,
    redraws: int = REDRAWS,
) -> dict[str, Any]:
    """Reserve a point for ``slot`` that no other trial of its stratum runs (see the module
    docstring) and return its params: ``params`` when free, else one of up to ``redraws``
    redraws, else a nudge. ``bounds`` limit the nudged learning rate."""
    current = free(params, seed, others(ledger, slot), redraw, bounds, slot.number, redraws)
    for _ in range(ROUNDS):
        ledger.tuning.reserve(slot, point_of(current, seed))
        taken = others(ledger, slot)
        if not clashes(point_of(current, seed), taken):
            return current
        current = free(current, seed, taken, redraw, bounds, slot.number, redraws)
    ledger.tuning.reserve(slot, point_of(current, seed))
    return current


def lr_range(config: StudyConfig) -> tuple[float, float]:
    """The study's learning-rate range: where a nudge may move a rate (the window a backend
    searches is a preference, not a limit)."""
    lr = config.space.param("learning_rate")
    assert isinstance(lr, FloatParam)
    return lr.low, lr.high


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _equal(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        try:
            return math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=0.0)
        except (TypeError, ValueError):
            return False
    return x == y
