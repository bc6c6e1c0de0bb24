"""The warm start: each batch size's first trial at the best rate a finished study found there
(``tuner.warm_start``, `study.config.study.WarmStart`).

A question asked again at another scale (the next rung of a data ladder, a harder target) has
its best rates near the earlier study's. The first trial of a batch size is the one nothing
bounds yet (its stratum has no best to prune against), and a study's first batch size has no
other batch size to bound it either, so a poor first rate costs the most there: on one rung of
the MNIST-1D CNN (seed 4), the first two batch sizes' first trials, at rates 10x below their
best, took 3,500 of the rung's 5,700 training steps. With a warm start they begin at the earlier
study's best; the rest of each search goes on as before (the samplers, transfer, the design).

`WarmStarter` is a member of the tuner `study.tuners.registry.Lineup`, asked before the
backend whose turn it is (whose name the trial is recorded under, as the designer's are).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from study.config.space import CategoricalParam, FloatParam, IntParam, Stratum
from study.config.study import StudyConfig, WarmStart
from study.errors import StudyNotFound, UsageError
from study.ledger import Ledger, Slot
from study.ledger.records import Origin
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.points import lr_range, settle
from study.tuners.transfer import transfer_learning_rate

#: The origin of a warm-started trial.
WARM: Origin = "warm"
#: The trial extra naming the study a warm-started trial's point came from.
WARM_FROM = "warm_start"


@dataclass(frozen=True)
class WarmPoint:
    """The best trial a finished study ran at ``batch_size``: its ``params`` (learning rate and
    any other tuned values) and its ``steps`` to target."""

    batch_size: int
    params: Mapping[str, Any]
    steps: float

    @property
    def learning_rate(self) -> float:
        return float(self.params["learning_rate"])


def read_points(warm: WarmStart, ledger: Ledger, strategy: str) -> tuple[WarmPoint, ...]:
    """The best trial per batch size of the study ``warm`` names (in ``warm.storage``, else in
    ``ledger``'s storage), of ``strategy`` where it ran that strategy, else of any.

    Raises:
        UsageError: the study is this one, or there is no such study (naming ``tuner.warm_start``).
    """
    if warm.study == ledger.name and warm.storage is None:
        raise UsageError(
            f"tuner.warm_start names this study itself ({warm.study!r}); name a finished study "
            "of the same question at another scale"
        )
    try:
        source = (
            ledger.sibling(warm.study)
            if warm.storage is None
            else Ledger.open(warm.storage, warm.study, create=False)
        )
    except UsageError as err:  # a storage that cannot be opened: say which key named it
        raise UsageError(f"tuner.warm_start.storage: {err}") from None
    try:
        source.require()
    except StudyNotFound:
        where = "this study's storage" if warm.storage is None else warm.storage
        raise UsageError(
            f"tuner.warm_start: no study named {warm.study!r} in {where}; `study ls` lists the "
            "studies there"
        ) from None
    strata = source.strata()
    same = [s for s in strata if s.strategy == strategy]
    best: dict[int, WarmPoint] = {}
    for stratum in same or strata:
        trial = source.best(stratum)
        if trial is None or trial.steps_to_target is None:
            continue
        point = WarmPoint(stratum.batch_size, clean_params(trial.params), trial.steps_to_target)
        kept = best.get(point.batch_size)
        if kept is None or point.steps < kept.steps:
            best[point.batch_size] = point
    return tuple(best[b] for b in sorted(best))


def warm_params(
    points: Sequence[WarmPoint], batch_size: int, config: StudyConfig
) -> dict[str, Any] | None:
    """The first trial's values at ``batch_size``: the learning rate of ``points`` there (where
    none was run there, interpolated in log-log between the nearest batch sizes, or extrapolated
    with a slope between 0 and 1: `transfer_learning_rate`), inside the study's range; the other
    tuned values from the nearest batch size's best. None without points, or when another tuned
    value is missing or outside this study's space.

    Example: best rates 0.01 at batch 32 and 0.04 at batch 128 give 0.02 at batch 64.
    """
    if not points:
        return None
    low, high = lr_range(config)
    exact = next((p for p in points if p.batch_size == batch_size), None)
    if exact is not None:
        rate: float | None = min(high, max(low, exact.learning_rate))
    else:
        pairs = [(p.batch_size, p.learning_rate) for p in points]
        rate = transfer_learning_rate(pairs, batch_size, low, high)
    if rate is None:
        return None
    nearest = min(points, key=lambda p: abs(math.log(p.batch_size / batch_size)))
    params: dict[str, Any] = {"learning_rate": float(rate)}
    for param in config.space.params:
        if param.name in ("learning_rate", "batch_size", "strategy"):
            continue
        value = nearest.params.get(param.name)
        if value is None or not _inside(param, value):
            return None
        params[param.name] = value
    return params


def _inside(param: Any, value: Any) -> bool:
    if isinstance(param, CategoricalParam):
        return value in param.choices
    if isinstance(param, (FloatParam, IntParam)):
        return isinstance(value, (int, float)) and param.low <= value <= param.high
    return False


class WarmStarter(TunerBackend):
    """Proposes each stratum's first trial from the study ``tuner.warm_start`` names (see the
    module); None for the others, and once the stratum has a trial of its own."""

    name = WARM

    def __init__(self, config: StudyConfig, ledger: Ledger) -> None:
        super().__init__(config, ledger)
        warm = config.tuner.warm_start
        assert warm is not None
        self.source = warm
        self._points: dict[str, tuple[WarmPoint, ...]] = {}
        for strategy in dict.fromkeys(s.strategy for s in config.strata):
            self.points(strategy)  # read now: a wrong name stops the run before it trains

    def points(self, strategy: str) -> tuple[WarmPoint, ...]:
        """The warm study's best per batch size for ``strategy`` (read once)."""
        if strategy not in self._points:
            self._points[strategy] = read_points(self.source, self.ledger, strategy)
        return self._points[strategy]

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        if self._started(history):
            return None
        stratum: Stratum = slot.stratum
        params = warm_params(self.points(stratum.strategy), stratum.batch_size, self.config)
        if params is None:
            return None
        params = settle(self.ledger, slot, params, None, lr_range(self.config))
        return Proposal(
            tuner=self.name, params=params, origin=WARM, extras={WARM_FROM: self.source.study}
        )

    @staticmethod
    def _started(history: History) -> bool:
        """Whether the stratum has a finished trial, or a warm-started one running or done."""
        return history.finished > 0 or any(
            t.origin == WARM and (t.open or t.status.counts()) for t in history.trials
        )
