"""Allocation by training steps: each trial goes where the answer narrows most per step.

With ``allocation: {mode: steps, steps: S}`` every batch size of the grid first runs half its
even share of trials (`study.ext.allocation.rounds.RoundAllocator.begin`). Then trials are
given one at a time (`plan_step`). The model of every trial (`study.tuners.design.design_model`) is fitted
to the finished trials but the latest (in the background, while that one trained:
`study.tuners.fit_ahead`), and at each batch size the designer's most informative learning rate
gives two numbers: how much a trial there is expected to narrow the answer (B_noise, the best
learning rate at the recommended batch size, and alpha, the best rate's slope over the batch
sizes: `study.tuners.design.BATCH_ANSWERS`) per 1,000 steps, and its expected steps (its steps
to the target if it reaches it, else where it is stopped: its budget, or with pruning the batch
size's best so far times the pruning's slack).

The study has two budgets: its ``S`` steps and the even total of trials (the trials the even
allocation would run). A trial uses a share of each, its expected steps over the steps left
and one over the trials left, and is priced at their sum (the usual greedy rule for a
knapsack with two constraints): the trial goes to the batch size whose narrowing per price is
the most among those whose expected steps fit what is left. So while steps are scarce a trial
goes where the answer narrows most per step, and once trials are the scarcer (steps to spare)
where it narrows most per trial, small batch sizes included. A batch size has at most
`MOST_SHARES` times its even share. The study ends when no batch size fits, or when its
trials reach the even total.

A batch size none of whose trials reached the target comes first, up to its even share (what
the even allocation would give it): the model has nothing of its own there and only
extrapolates, so its variances say little about what a trial there would teach. The same
order (the fewest trials, the cheapest first) holds before the model can be fitted (fewer than
three batch sizes reached the target). Every decision says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.config.space import Stratum
from study.ledger import Decision
from study.tuners.design import (
    BATCH_ANSWERS,
    DesignModel,
    best_design,
    design_model,
    expected_cost,
)

#: A batch size gets at most this many times its even share of trials.
MOST_SHARES = 2


@dataclass(frozen=True)
class StepView:
    """One batch size as a step plan sees it: its ``trials`` so far, its best steps to the
    target (inf if none reached), the most steps any of its trials ran, the most steps a trial
    may run (``limit``, inf if unbounded), its even ``share`` of trials and the most trials it
    may have (``cap``)."""

    stratum: Stratum
    trials: int
    best_steps: float
    most_steps: float
    limit: float
    share: int
    cap: int

    @property
    def unmeasured(self) -> bool:
        """No trial reached the target yet, and it has fewer than its even share."""
        return not math.isfinite(self.best_steps) and self.trials < self.share

    def stop_at(self, prune_at: float) -> float:
        """Where a new trial is stopped at the latest: its limit, or ``prune_at`` times the
        best so far (`study.config.study.StudyConfig.prune_factor`: ``inf`` without
        pruning)."""
        return min(self.limit, prune_at * self.best_steps)


def _guess_cost(view: StepView, prune_at: float) -> float:
    """A trial's steps without a model: its stop, else the most its batch size's trials ran."""
    stop = view.stop_at(prune_at)
    if math.isfinite(stop):
        return stop
    return view.most_steps if view.most_steps > 0 else math.inf


def in_flight_steps(views: Sequence[StepView], running: Sequence[int], prune_at: float) -> float:
    """The steps the trials still running are expected to take: per batch size, its running
    trials (``running``, in the order of ``views``) times where one is stopped at the latest
    (`_guess_cost`; none when that is unknown).

    Example: two trials running at a batch size whose best so far took 87 steps, with
    ``prune_at`` 1: 174.
    """
    out = 0.0
    for view, count in zip(views, running, strict=True):
        cost = _guess_cost(view, prune_at) if count else 0.0
        out += count * cost if math.isfinite(cost) else 0.0
    return out


def _first_cost(view: StepView, model: DesignModel | None, prune_at: float) -> float:
    """An unmeasured batch size's next trial's expected steps: at the model's best rate there
    (its steps, or its stop when it misses), else `_guess_cost`."""
    if model is None:
        return _guess_cost(view, prune_at)
    surrogate = model.surrogate
    median = surrogate.steps(view.stratum.batch_size)
    _, cost = expected_cost(np.log(median), surrogate.sigma, view.stop_at(prune_at))
    return float(cost[0]) if np.isfinite(cost[0]) else _guess_cost(view, prune_at)


def plan_step(
    views: Sequence[StepView],
    trials: pd.DataFrame,
    *,
    left: float,
    number: int,
    bounds: tuple[float, float],
    prune_at: float,
    accelerators: int = 8,
    fit: Callable[[pd.DataFrame, int], DesignModel | None] = design_model,
) -> tuple[Decision, bool]:
    """The next trial's batch size as a decision of round ``number``, and whether it is one
    (False: the study stops, and the decision says why). ``trials``: the finished trials the
    model is fitted to (`study.tuners.trial_frame.ledger_frame`), by ``fit`` (`design_model`, or the
    fit made ahead: `study.tuners.fit_ahead.model_for`), asked only when the decision can use
    it; ``left``: the training steps left of the budget.

    Example: two batch sizes equally informative per step, one of which costs more steps than
    are left: the other gets the trial.
    """
    open_ = [v for v in views if v.trials < v.cap]
    if not open_:
        last = max(views, key=lambda v: v.stratum.batch_size)
        return Decision(number, str(last.stratum), 0, "every batch size has its most trials"), False
    model = fit(trials, accelerators) if len(trials) else None
    unmeasured = sorted(
        (
            (v.trials, _first_cost(v, model, prune_at), -v.stratum.batch_size, v)
            for v in open_
            if v.unmeasured
        ),
        key=lambda item: item[:3],
    )
    for _, cost, _, view in unmeasured:
        if cost <= left:
            why = (
                f"none of its {view.trials} trials reached the target yet (its even share is "
                f"{view.share}; ~{cost:,.0f} steps expected): the model only extrapolates there"
            )
            return Decision(number, str(view.stratum), 1, f"{why}; {left:,.0f} steps left"), True
    trials_left = max(1, sum(v.share for v in views) - sum(v.trials for v in views))
    scored: list[tuple[float, float, StepView, str]] = []  # (per price, cost, view, why)
    for view in open_:
        design = None
        if model is not None:
            design = best_design(
                model,
                view.stratum.batch_size,
                bounds,
                budget=view.stop_at(prune_at),
                answers=BATCH_ANSWERS,
            )
        if design is None:
            cost = _guess_cost(view, prune_at)
            value = -float(view.trials)  # the fewest trials first, then the cheapest
            why = f"the fewest trials ({view.trials}) while the model cannot be fitted yet"
        else:
            cost = design.cost
            narrows = design.gain * cost / 1000.0  # the gain is per 1,000 steps
            value = narrows / (cost / max(left, 1.0) + 1.0 / trials_left)
            why = (
                f"a trial here narrows the answer's variance by {narrows:.3g} (lr "
                f"{design.learning_rate:.3g}, ~{cost:,.0f} steps expected): the most for its "
                f"share of the steps and of the {trials_left} trials left, of the batch sizes "
                "that fit"
            )
        scored.append((value, cost, view, why))
    scored.sort(key=lambda item: (-item[0], item[1], -item[2].stratum.batch_size))
    for _value, cost, view, why in scored:
        if cost <= left:
            return Decision(number, str(view.stratum), 1, f"{why}; {left:,.0f} steps left"), True
    _, cost, view, _ = scored[0]
    reason = (
        f"its next trial (~{cost:,.0f} steps expected) and every other batch size's exceed the "
        f"{max(left, 0):,.0f} training steps left: the study's step budget is spent"
    )
    return Decision(number, str(view.stratum), 0, reason), False
