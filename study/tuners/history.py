"""What a backend proposes from, read off the ledger: the stratum's trials, each other batch
size's best learning rate (with the rates tried around it, `best_rate`), and the learning-rate
window they centre the stratum's search on.

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
from study.results import TrialState
from study.tuners.base import History
from study.tuners.points import SEED
from study.tuners.same_trials import SameTrials
from study.tuners.transfer import BestRate, Window, search_window

#: Outcomes that say on which side of the optimum a trial's rate lies (a crash says nothing).
_OUTCOMES = (TrialState.REACHED, TrialState.NOT_REACHED, TrialState.DIVERGED, TrialState.PRUNED)


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


def best_rate(trials: Sequence[LedgerTrial]) -> BestRate | None:
    """The best learning rate of a stratum's trials (`stratum_best`) with the number and range
    of the rates its trials at the study's seed ran to an outcome (reached, not reached,
    diverged or pruned); None if none reached the target.

    Example: rates 0.01 (200 steps), 0.03 (120 steps) and 0.1 (diverged) give the best 0.03
    inside (0.01, 0.1) from 3 trials.
    """
    best = stratum_best(trials)
    if best is None:
        return None
    rates = [
        t.learning_rate
        for t in trials
        if t.result is not None and t.status in _OUTCOMES and _seed(t) is None
    ]
    lr = best[0].learning_rate
    return BestRate(
        best[0].stratum.batch_size,
        lr,
        len(rates),
        min(rates, default=lr),
        max(rates, default=lr),
        best[1].steps,
    )


#: `best_rate` of each stratum, computed again only when its trials change (`SameTrials`).
_best_rates = SameTrials(best_rate)


def neighbours(ledger: Ledger, config: StudyConfig, stratum: Stratum) -> list[BestRate]:
    """The best rate (`best_rate`) of every other batch size with the same strategy whose
    trials reached the target."""
    found = []
    for batch in config.space.batch_sizes:
        if batch != stratum.batch_size:
            other = Stratum(batch, stratum.strategy)
            finished = [t for t in ledger.trials(other) if t.result is not None]
            best = _best_rates(finished, other)  # a running trial counts for nothing
            if best is not None:
                found.append(best)
    return found


#: Before a stratum has a best to prune against, a trial stops after this many times the steps
#: the other batch sizes' results allow it (`step_bound`); a best slower than that is not its
#: batch size's optimum yet (`study.tuners.designer`).
SCALING_SLACK = 2.0


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
    near: Sequence[BestRate],
) -> Window:
    """The stratum's learning-rate window (`search_window`; the whole range when
    ``tuner.transfer`` is off)."""
    lr = config.space.param("learning_rate")
    assert isinstance(lr, FloatParam)
    if not config.tuner.transfer:
        return Window(lr.low, lr.high)
    own = best_rate([t for t in trials if _seed(t) is None])
    return search_window(near, stratum.batch_size, lr.low, lr.high, own)


def read_history(
    ledger: Ledger, config: StudyConfig, stratum: Stratum, budget: int | None = None
) -> History:
    """The `History` of a stratum as the ledger holds it now."""
    trials = tuple(ledger.trials(stratum))
    found = neighbours(ledger, config, stratum)
    near = found if config.tuner.transfer else []
    window = window_of(config, stratum, trials, near)
    return History(
        stratum,
        trials,
        window.bounds,
        tuple(near),
        centre=window.centre,
        budget=budget,
        neighbour_steps=tuple((n.batch_size, n.steps) for n in found),
    )


def _point(trial: LedgerTrial) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in trial.params.items()))


def _seed(trial: LedgerTrial) -> int | None:
    seed = trial.extras.get(SEED)
    return int(seed) if isinstance(seed, (int, float)) and not isinstance(seed, bool) else None
