"""What a backend proposes from, read off the ledger: the stratum's trials, each other batch
size's best learning rate, and the learning-rate window they centre the stratum's search on.

A stratum's best is robust when confirmation trials ran (`stratum_best`): the point with the
least median over seeds, not one lucky trial (`study.analysis.seeds`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from study.analysis.seeds import SeedEstimate, best_over_seeds
from study.config.space import FloatParam, Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger, LedgerTrial
from study.tuners.base import History
from study.tuners.points import SEED
from study.tuners.transfer import Window, search_window


def stratum_best(trials: Sequence[LedgerTrial]) -> tuple[LedgerTrial, SeedEstimate] | None:
    """The best finished trial of a stratum and its estimate over seeds, or None if none
    reached the target. Points run under several seeds count by their median steps (the trial
    returned is the point's trial at the study's seed); otherwise the fewest steps win.

    Example: lr 0.1 reaching the target in 100 steps, confirmed in 140 and 150 under two other
    seeds, loses to lr 0.2 with 120, 125 and 118.
    """
    done = [t for t in trials if t.result is not None and t.status.counts()]
    estimate = best_over_seeds(
        list(range(len(done))),
        [_point(t) for t in done],
        [_seed(t) for t in done],
        [float(t.steps_to_target) if t.steps_to_target is not None else math.inf for t in done],
        [t.learning_rate for t in done],
    )
    if estimate is None or not math.isfinite(estimate.steps):
        return None
    return done[int(estimate.index)], estimate


def neighbours(
    ledger: Ledger, config: StudyConfig, stratum: Stratum
) -> list[tuple[int, float, float]]:
    """``(batch size, best learning rate, its steps to target)`` of every other batch size with
    the same strategy whose trials reached the target (`stratum_best`)."""
    found = []
    for batch in config.space.batch_sizes:
        if batch != stratum.batch_size:
            best = stratum_best(ledger.trials(Stratum(batch, stratum.strategy)))
            if best is not None:
                found.append((batch, best[0].learning_rate, best[1].steps))
    return found


def step_bound(batch_size: int, others: Sequence[tuple[int, float]], factor: float) -> float:
    """The most steps a good trial at ``batch_size`` should need, from the steps to target
    ``(batch size, steps)`` of other batch sizes, times ``factor``: at most the steps of a
    smaller batch size (steps never grow with the batch size), and at most ``B' / B`` times
    those of a larger one ``B'`` (halving the batch size at most doubles the steps: perfect
    scaling, the steepest case of ``S(B) = S_min (1 + B_noise / B)``). ``inf`` without others.

    Example: 78 steps at batch 256 bound batch 128 by 156 steps, so 312 with ``factor=2``.
    """
    bounds = [
        steps if batch < batch_size else steps * batch / batch_size
        for batch, steps in others
        if batch != batch_size and steps > 0 and math.isfinite(steps)
    ]
    return factor * min(bounds) if bounds else math.inf


def window_of(
    config: StudyConfig,
    stratum: Stratum,
    trials: Sequence[LedgerTrial],
    near: Sequence[tuple[int, float]],
) -> Window:
    """The stratum's learning-rate window (`search_window`; the whole range when
    ``tuner.transfer`` is off)."""
    lr = config.space.param("learning_rate")
    assert isinstance(lr, FloatParam)
    if not config.tuner.transfer:
        return Window(lr.low, lr.high)
    best = stratum_best([t for t in trials if _seed(t) is None])
    own = best[0].learning_rate if best is not None else None
    return search_window(near, stratum.batch_size, lr.low, lr.high, own)


def read_history(
    ledger: Ledger, config: StudyConfig, stratum: Stratum, budget: int | None = None
) -> History:
    """The `History` of a stratum as the ledger holds it now."""
    trials = tuple(ledger.trials(stratum))
    found = neighbours(ledger, config, stratum)
    near = [(batch, lr) for batch, lr, _ in found] if config.tuner.transfer else []
    window = window_of(config, stratum, trials, near)
    return History(
        stratum,
        trials,
        window.bounds,
        tuple(near),
        centre=window.centre,
        budget=budget,
        neighbour_steps=tuple((batch, steps) for batch, _, steps in found),
    )


def _point(trial: LedgerTrial) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in trial.params.items()))


def _seed(trial: LedgerTrial) -> int | None:
    seed = trial.extras.get(SEED)
    return int(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else None
