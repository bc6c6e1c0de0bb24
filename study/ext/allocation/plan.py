"""Adaptive allocation's plan: where a round's trials narrow B_noise's interval most.

Even allocation gives every stratum ``trials_per_stratum`` trials. Adaptive allocation
(``allocation: {mode: adaptive, rounds: N}``) spends the same total differently:

1. **Grid from a pilot.** The batch sizes of ``search_space.batch_size`` within about 16x of the
   pilot's B_simple either side (at least 6 of them; `initial_grid`) start, each with half its
   even share of trials, and at least `LEAST_TRIALS` (`RoundAllocator.initial`).
2. **Rounds.** When those are done, the rest of the budget goes out in ``rounds`` rounds. Each
   round fits ``S(B) = S_min (1 + B_noise / B)`` with its profile intervals to the strata that
   have their initial trials (a best of fewer is mostly luck) and gives each trial
   (`plan_round`) to the stratum that needs it most (`Tier`, most pressing first):

   - a stratum short of its initial trials (it does not count in the fit until it has them);
   - the stratum whose best, fallen to what it can attain, would narrow B_noise's interval
     most (`interval_gain`) times the chance that a trial improves its best. A best over
     trials only falls with more trials, and it can attain the fitted curve and the most steps
     the other batch sizes allow (steps never grow with the batch size, and halving the batch
     size at most doubles them: a best above either is provably under-searched). One outlier
     widens the profile interval several times, so this goes where the width comes from, not
     where the model is merely uncertain. A best of n trials is beaten by the next with chance
     about 1 / (n + 1); twice that while its best learning rate is the highest or lowest its
     trials ran (`StratumView.at_edge`: the optimum may lie beyond, and the search follows);
   - else the widest pointwise interval of steps, by the same chance.

   A stratum past maximal data parallelism (``B > MAX_PARALLEL x`` the upper end of B_noise's
   interval: within 1/9 of S_min) whose best is on the curve gets none, and a batch size of the
   file beyond the grid is added while B_noise's interval reaches within that factor of the
   grid's end, never past maximal data parallelism.

Pure decision math over the strata's bests (`StratumView`); the rounds' bookkeeping (the
budgets, the state kept in the ledger, the claim on each round) is `study.ext.allocation.rounds`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

import numpy as np

from study.analysis.noise_scale import NoiseScaleFit, fit_noise_scale
from study.analysis.pilot import LEAST_SIZES, SPAN
from study.config.space import Stratum
from study.ledger import Decision, LedgerTrial
from study.results import TrialState
from study.tuners.history import step_bound

#: Share of a stratum's even trials it gets when it joins the grid (at least `LEAST_TRIALS`).
INITIAL_SHARE = 0.5
#: The fewest finished trials a stratum needs before its best counts in the fit that plans a
#: round (capped at ``trials_per_stratum``): the tuner's first two trials in a stratum are
#: startup draws, so a best of fewer is mostly luck, and one poor best widens the interval.
LEAST_TRIALS = 3
#: A best learning rate in the outer tenth (in log space) of its searched range is at the edge.
EDGE = 0.1
#: Beyond this many times B_noise (its interval's upper end) steps are within 1/9 of S_min:
#: maximal data parallelism, where more batch buys nothing.
MAX_PARALLEL = 8.0
#: A stratum whose best, fallen to what it can attain, would narrow B_noise's interval by less
#: than this (log units: 2%) is left to the interval-of-steps rule.
MIN_GAIN = math.log(1.02)
#: The width (log of high / low) counted for an interval of B_noise without an upper end.
UNBOUNDED = math.log(1e6)
#: Without a fit, a stratum none of whose trials reached the target (a hole in the curve) weighs
#: this many times one that did.
UNREACHED_WEIGHT = 10.0
#: A best within this log gap of what it can attain (x1.5) is on the curve: it may stop past
#: maximal data parallelism.
CONSISTENT = math.log(1.5)

#: Trial outcomes that place a learning rate relative to the stratum's optimum.
_OUTCOMES = (TrialState.REACHED, TrialState.NOT_REACHED, TrialState.DIVERGED, TrialState.PRUNED)


class Tier(IntEnum):
    """Why a stratum wants a trial; a higher tier goes first."""

    SPREAD = 0
    """The fit's pointwise interval of steps is wide there (or no fit yet)."""
    GAIN = 1
    """Its best, fallen to what it can attain, would narrow B_noise's interval."""
    LEAST = 2
    """It has fewer than the initial trials a stratum needs to count in the fit."""


@dataclass(frozen=True)
class StratumView:
    """What a decision about one stratum is made from: its finished ``trials``, its best steps
    and learning rate, and the range of learning rates its trials ran (`tried_range`)."""

    stratum: Stratum
    trials: int
    best_steps: float = math.inf
    best_lr: float | None = None
    searched: tuple[float, float] | None = None

    @property
    def at_edge(self) -> bool:
        """Whether the best learning rate sits in the outer `EDGE` of the ``searched`` log
        range (the rates its trials ran): its optimum is not bracketed and may lie beyond."""
        if self.best_lr is None or self.searched is None:
            return False
        low, high = (math.log(v) for v in self.searched)
        if not high > low:
            return False
        position = (math.log(self.best_lr) - low) / (high - low)
        return position < EDGE or position > 1 - EDGE

    @property
    def reached(self) -> bool:
        return math.isfinite(self.best_steps)


@dataclass(frozen=True)
class Need:
    """What one stratum wants from a round: first the ``urgent`` trials (each a tier, a
    priority within it and a reason), then more at ``tier`` with priority ``value / (1 +
    trials so far)`` (a best of n trials is beaten by the next with chance about 1 / (n + 1))."""

    view: StratumView
    tier: Tier
    value: float
    reason: str
    urgent: tuple[tuple[Tier, float, str], ...] = ()

    def priority(self, given: int) -> tuple[int, float]:
        """The priority of its next trial after ``given`` trials this round: ``value`` times
        the chance that the trial improves its best, about ``1 / (n + 1)`` after n trials, and
        twice that (``1 / (n / 2 + 1)``) while its best learning rate sits at the edge of the
        rates tried (its optimum may lie beyond, and the search moves towards it)."""
        if given < len(self.urgent):
            return int(self.urgent[given][0]), self.urgent[given][1]
        tries = self.view.trials + given
        return int(self.tier), self.value / (1 + (tries / 2 if self.view.at_edge else tries))

    def why(self, given: int) -> str:
        """The reason for ``given`` trials this round (with the stratum's trials so far)."""
        reasons = [r for _, _, r in self.urgent[:given]]
        if given > len(self.urgent):
            reasons.append(self.reason)
        text = "; then ".join(dict.fromkeys(reasons))  # each reason once, in order
        return f"{text} ({_trials(self.view.trials)} so far)"


def initial_grid(
    candidates: Sequence[int], b_simple: float, span: float = SPAN, least: int = LEAST_SIZES
) -> tuple[int, ...]:
    """The candidates within ``[b_simple / span, b_simple x span]``, grown to ``least`` with
    the nearest others (in log distance to B_simple); all candidates when fewer.

    Example: candidates 8, 16, ..., 4096 and B_simple 100 give 8 to 1024 (6.25 to 1600).
    """
    ordered = sorted(set(candidates))
    if not (math.isfinite(b_simple) and b_simple > 0):
        return tuple(ordered)
    inside = [b for b in ordered if b_simple / span <= b <= b_simple * span]
    others = sorted(
        (b for b in ordered if b not in inside), key=lambda b: abs(math.log(b / b_simple))
    )
    chosen = inside + others[: max(0, least - len(inside))]
    return tuple(sorted(chosen))


def tried_range(trials: Sequence[LedgerTrial]) -> tuple[float, float] | None:
    """The lowest and highest learning rate a stratum's trials ran to an outcome (reached,
    not reached, diverged or pruned: each says which side of the optimum it lies); None
    without any.

    Example: rates 0.01 (reached), 0.1 (diverged) and 1.0 (failed) give (0.01, 0.1).
    """
    rates = [t.learning_rate for t in trials if t.result is not None and t.status in _OUTCOMES]
    return (min(rates), max(rates)) if rates else None


def fit_views(views: Sequence[StratumView]) -> NoiseScaleFit:
    """The noise-scale fit (with profile intervals) of the strata's best steps."""
    return fit_noise_scale([v.stratum.batch_size for v in views], [v.best_steps for v in views])


def interval_width(fit: NoiseScaleFit) -> float:
    """The width of B_noise's interval, ``log(high / low)`` (`UNBOUNDED` at most, and without
    a fit)."""
    if not fit.ok or fit.b_noise_ci is None:
        return UNBOUNDED
    low, high = fit.b_noise_ci
    if not (low > 0 and math.isfinite(high)):
        return UNBOUNDED
    return min(UNBOUNDED, math.log(high / low))


def attainable(views: Sequence[StratumView], index: int, fit: NoiseScaleFit) -> float:
    """The fewest steps the stratum ``views[index]`` may reach with more trials, as known now:
    its best, the fitted curve there (when ``fit`` is ok) and the most steps the other strata
    allow (`step_bound`: a smaller batch size's best, or ``B' / B`` times a larger one's).

    Example: bests 600 at batch 32 and 400 at batch 64 give batch 64 at most 600 steps, and
    batch 32 at most 800: neither is under-searched by that rule alone.
    """
    view = views[index]
    others = [(v.stratum.batch_size, v.best_steps) for v in views if v is not view and v.reached]
    bound = step_bound(view.stratum.batch_size, others, 1.0)
    curve = float(fit.predict_steps(view.stratum.batch_size)) if fit.ok else math.inf
    return min(view.best_steps, bound, curve)


def interval_gain(views: Sequence[StratumView], index: int, fit: NoiseScaleFit) -> float:
    """How much B_noise's interval narrows (in log units: ``log`` of the ratio of widths),
    on average over what an improvement of the best of ``views[index]`` may bring: the fit's
    sensitivity to that stratum. Zero when it cannot fall.

    A reached best falls somewhere between what it can attain (`attainable`) and itself: the
    outcomes weighed are that value and the geometric middle. An unreached stratum, once it
    reaches, may land at that value or above it (`CONSISTENT`: x1.5, x2.25), and a point far
    above the curve widens the interval: its gain may be negative, the more so the more
    strata pin the curve down.

    Example: bests on a curve but one at batch 1024 twice above a smaller batch size's best
    give that one a gain of most of the log of how much wider the outlier makes the interval.
    """
    view = views[index]
    target = attainable(views, index, fit)
    if not target < view.best_steps:
        return 0.0
    if view.reached:
        outcomes = [target, math.sqrt(target * view.best_steps)]
    else:
        outcomes = [target * math.exp(k * CONSISTENT) for k in range(3)]
    widths = [
        interval_width(
            fit_views([replace(v, best_steps=o) if i == index else v for i, v in enumerate(views)])
        )
        for o in outcomes
    ]
    return interval_width(fit) - sum(widths) / len(widths)


def plan_round(
    views: Sequence[StratumView],
    trials: int,
    number: int,
    *,
    candidates: Sequence[int] = (),
    initial: int = 1,
) -> list[Decision]:
    """How one round's ``trials`` are spread over the strata of one strategy (``views``).

    The strata with ``initial`` trials or more are fitted. First a batch size of
    ``candidates`` beyond the grid is added (with ``initial`` trials) where the fit says the
    curve's knee may lie past the grid's end; then each remaining trial goes to the stratum of
    highest `Need.priority` (`Tier` first): short of ``initial`` trials, then the largest
    `interval_gain`, then the widest pointwise interval of steps, each times the chance that
    a trial improves its best. Strata past maximal data parallelism whose best is on the curve
    (and whose best rate is not at the edge of those tried) get none. With no fit yet (fewer
    than three fitted batch sizes reached the target), the strata that have not reached it
    come first, then those with the fewest trials.
    """
    counted = [v for v in views if v.trials >= initial]
    fit = fit_views(counted) if len(counted) >= 3 else fit_views([])
    decisions: list[Decision] = []
    strategy = views[0].stratum.strategy
    left = trials
    for size, reason in _new_sizes(counted, fit, candidates):
        if left < initial:
            break
        decisions.append(Decision(number, str(Stratum(size, strategy)), initial, reason))
        left -= initial
    needs, skipped = _needs(views, counted, fit, initial)
    for view, reason in skipped:
        decisions.append(Decision(number, str(view.stratum), 0, reason))
    given: dict[Stratum, int] = {}
    for _ in range(left):
        if not needs:
            break
        best = max(
            needs,
            key=lambda s: (*needs[s].priority(given.get(s, 0)), -s.batch_size),
        )
        given[best] = given.get(best, 0) + 1
    for stratum, count in sorted(given.items(), key=lambda item: item[0].batch_size):
        decisions.append(Decision(number, str(stratum), count, needs[stratum].why(count)))
    return decisions


def _trials(n: int) -> str:
    return f"{n} trial" + ("" if n == 1 else "s")


def _new_sizes(
    views: Sequence[StratumView], fit: NoiseScaleFit, candidates: Sequence[int]
) -> list[tuple[int, str]]:
    """Batch sizes to add beyond either end of the grid, with why."""
    if not fit.ok or fit.b_noise_ci is None or not views:
        return []
    sizes = sorted(v.stratum.batch_size for v in views)
    low, high = fit.b_noise_ci
    out = []
    above = [b for b in sorted(candidates) if b > sizes[-1]]
    if above and sizes[-1] < MAX_PARALLEL * high:
        out.append(
            (
                above[0],
                f"B_noise may be as large as {high:.3g}: the curve must be seen up to "
                f"{MAX_PARALLEL:g}x it (maximal data parallelism); the grid ends at {sizes[-1]}",
            )
        )
    below = [b for b in sorted(candidates) if b < sizes[0]]
    if below and sizes[0] > low / MAX_PARALLEL:
        out.append(
            (
                below[-1],
                f"B_noise may be as small as {low:.3g}: perfect scaling must be seen below "
                f"{low / MAX_PARALLEL:.3g}; the grid starts at {sizes[0]}",
            )
        )
    return out


def _needs(
    views: Sequence[StratumView],
    counted: Sequence[StratumView],
    fit: NoiseScaleFit,
    initial: int,
) -> tuple[dict[Stratum, Need], list[tuple[StratumView, str]]]:
    """Each stratum's `Need`; the strata that get nothing (past maximal data parallelism and
    on the curve there) with why."""
    base = _base_needs(counted, fit)
    needs: dict[Stratum, Need] = {}
    skipped: list[tuple[StratumView, str]] = []
    for view in views:
        tier, value, reason = base.get(
            view.stratum, (Tier.SPREAD, 1.0, "spread over the fewest-searched strata")
        )
        urgent: list[tuple[Tier, float, str]] = [
            (
                Tier.LEAST,
                -float(view.trials + k),
                f"{_trials(view.trials)} of the {initial} a stratum needs before its best "
                "counts in the fit",
            )
            for k in range(max(0, initial - view.trials))
        ]
        if view.at_edge:
            low, high = view.searched or (math.nan, math.nan)
            edge = (
                f"its best learning rate {view.best_lr:.3g} sits at the edge of the rates its "
                f"trials ran ({low:.3g} to {high:.3g}): its optimum may lie beyond"
            )
            if tier is None:  # past maximal data parallelism, but its optimum was not found
                tier, value, reason = Tier.SPREAD, 1.0, edge
            else:
                reason = f"{reason}; {edge}"
        if tier is None:
            if not urgent:
                skipped.append((view, reason))
                continue
            tier, value = Tier.SPREAD, 0.0
        needs[view.stratum] = Need(view, tier, value, reason, tuple(urgent))
    return needs, skipped


def _base_needs(
    views: Sequence[StratumView], fit: NoiseScaleFit
) -> dict[Stratum, tuple[Tier | None, float, str]]:
    """Per fitted stratum: its tier (None: no more trials), value and why."""
    if not fit.ok:
        return {
            v.stratum: (Tier.SPREAD, 1.0, f"no fit yet ({fit.reason}): the fewest-searched")
            if v.reached
            else (
                Tier.SPREAD,
                UNREACHED_WEIGHT,
                f"no trial has reached the target yet (no fit yet: {fit.reason})",
            )
            for v in views
        }
    sizes = np.array([v.stratum.batch_size for v in views], dtype=float)
    band = fit.steps_band(sizes)
    width = interval_width(fit)
    upper = fit.b_noise_ci[1] if fit.b_noise_ci else math.inf
    out: dict[Stratum, tuple[Tier | None, float, str]] = {}
    for i, view in enumerate(views):
        target = attainable(views, i, fit)
        gap = math.log(view.best_steps / target) if view.reached else math.inf
        if sizes[i] > MAX_PARALLEL * upper and gap < CONSISTENT:
            out[view.stratum] = (
                None,
                0.0,
                f"past maximal data parallelism (B > {MAX_PARALLEL:g} x B_noise's upper end "
                f"{upper:.3g}) and on the curve there: no more trials",
            )
            continue
        gain = interval_gain(views, i, fit)
        if gain >= MIN_GAIN:
            how = (
                f"its best {view.best_steps:.0f} steps fell towards the {target:.0f} it can "
                "attain (more trials can only lower a best)"
                if view.reached
                else f"it reached the target (in {target:.0f} steps at best)"
            )
            out[view.stratum] = (
                Tier.GAIN,
                gain,
                f"B_noise's 95% interval (x{math.exp(width):.3g}) would narrow to "
                f"x{math.exp(width - gain):.3g} on average if {how}",
            )
            continue
        low, high = (band[0][i], band[1][i]) if band is not None else (math.nan, math.nan)
        spread = float(np.log(high / low)) if low > 0 and math.isfinite(high) else UNBOUNDED
        out[view.stratum] = (
            Tier.SPREAD,
            spread,
            f"the fit's 95% interval of steps is wide here ({low:.0f} to {high:.0f}, "
            f"x{math.exp(spread):.2f})",
        )
    return out
