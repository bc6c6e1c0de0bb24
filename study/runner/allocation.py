"""Adaptive allocation: a study's trials go where the batch-size curve is least certain.

Even allocation gives every stratum ``trials_per_stratum`` trials. Adaptive allocation
(``allocation: {mode: adaptive, rounds: N}``) spends the same total differently:

1. **Grid from a pilot.** The batch sizes of ``search_space.batch_size`` within about 16x of the
   pilot's B_simple either side (at least 6 of them; `initial_grid`) start, each with half its
   even share of trials (`INITIAL_SHARE`).
2. **Rounds.** When those are done, the rest of the budget goes out in ``rounds`` rounds. Each
   round fits ``S(B) = S_min (1 + B_noise / B)`` with its profile intervals and gives trials
   (`plan_round`) to strata whose best learning rate sits at the edge of its searched range
   (the best may lie outside: more trials re-centre the search), then by the width of the
   fit's pointwise interval of steps plus how far the stratum's best lies above the curve or
   above a smaller batch size's best (a best over trials only falls with more trials: such a
   stratum is under-searched). A stratum past maximal data parallelism (``B > MAX_PARALLEL
   x`` the upper end of B_noise's interval: within 1/9 of S_min) whose best is on the curve
   gets none, and a batch size of the file beyond the grid is added while B_noise's interval
   reaches within that factor of the grid's end, never past maximal data parallelism.

Every decision says why (`Decision.reason`); the engine prints it and the tracker logs the
state (``allocation.json`` on the study's MLflow run). The state is kept in the ledger
(`Ledger.set_allocation`), so a resumed run continues its rounds and a process that reaches a
round another process already opened takes that round. (Two processes reaching the same round
at the same instant may both decide it; the later write wins, and the earlier one's extra
trials run over budget.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from study.analysis.noise_scale import NoiseScaleFit, fit_noise_scale
from study.analysis.pilot import LEAST_SIZES, SPAN
from study.config.space import CategoricalParam, Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger

#: Share of a stratum's even trials it gets before the first round.
INITIAL_SHARE = 0.5
#: A best learning rate in the outer tenth (in log space) of its searched range is at the edge.
EDGE = 0.1
#: Beyond this many times B_noise (its interval's upper end) steps are within 1/9 of S_min:
#: maximal data parallelism, where more batch buys nothing.
MAX_PARALLEL = 8.0
#: A priority for a best learning rate at the edge: above any interval width.
EDGE_PRIORITY = 100.0
#: A priority for a stratum none of whose trials reached the target (a hole in the curve):
#: above the usual interval widths and gaps, below an edge; each trial it gets this round
#: divides it (10, 5, 3.3, ...), so it gets a few, not the whole round.
UNREACHED_PRIORITY = 10.0
#: Weight of a best that lies above the curve (log units), against the interval's width.
UNDER_SEARCHED = 2.0
#: A best within this log gap of the curve (x1.5) is on it: it may stop past maximal
#: data parallelism.
CONSISTENT = math.log(1.5)


@dataclass(frozen=True)
class StratumView:
    """What a decision about one stratum is made from."""

    stratum: Stratum
    trials: int
    best_steps: float = math.inf
    best_lr: float | None = None
    searched: tuple[float, float] | None = None

    @property
    def at_edge(self) -> bool:
        """Whether the best learning rate sits in the outer `EDGE` of the searched log range."""
        if self.best_lr is None or self.searched is None:
            return False
        low, high = (math.log(v) for v in self.searched)
        if not high > low:
            return False
        position = (math.log(self.best_lr) - low) / (high - low)
        return position < EDGE or position > 1 - EDGE


@dataclass(frozen=True)
class Decision:
    """Trials given to a stratum in a round, and why."""

    round: int
    stratum: str
    trials: int
    reason: str

    def line(self) -> str:
        return f"allocation round {self.round}: {self.stratum} +{self.trials}: {self.reason}"


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


def fit_views(views: Sequence[StratumView]) -> NoiseScaleFit:
    """The noise-scale fit (with profile intervals) of the strata's best steps."""
    return fit_noise_scale(
        [v.stratum.batch_size for v in views], [v.best_steps for v in views], n_boot=1
    )


def plan_round(
    views: Sequence[StratumView],
    trials: int,
    number: int,
    *,
    candidates: Sequence[int] = (),
    initial: int = 1,
) -> list[Decision]:
    """How one round's ``trials`` are spread over the strata of one strategy (``views``).

    First, a batch size of ``candidates`` beyond the grid is added (with ``initial`` trials)
    where the fit says the curve's knee may lie past the grid's end; then each remaining trial
    goes to the stratum of highest priority: a best learning rate at the edge of its range
    first, then the widest pointwise interval of steps (``log(high / low)``), each divided by
    one plus the trials it got this round so far. Strata past maximal data parallelism get
    none. With no fit yet (fewer than three batch sizes reached the target), the strata that
    have not reached it come first, then those with the fewest trials.
    """
    fit = fit_views(views)
    decisions: list[Decision] = []
    strategy = views[0].stratum.strategy
    left = trials
    for size, reason in _new_sizes(views, fit, candidates):
        if left < initial:
            break
        decisions.append(Decision(number, str(Stratum(size, strategy)), initial, reason))
        left -= initial
    scores, reasons, skipped = _priorities(views, fit)
    for view in skipped:
        decisions.append(Decision(number, str(view.stratum), 0, reasons[view.stratum]))
    given: dict[Stratum, int] = {}
    for _ in range(left):
        if not scores:
            break
        best = max(scores, key=lambda s: (scores[s] / (1 + given.get(s, 0)), -s.batch_size))
        given[best] = given.get(best, 0) + 1
    for stratum, count in sorted(given.items(), key=lambda item: item[0].batch_size):
        decisions.append(Decision(number, str(stratum), count, reasons[stratum]))
    return decisions


def _new_sizes(
    views: Sequence[StratumView], fit: NoiseScaleFit, candidates: Sequence[int]
) -> list[tuple[int, str]]:
    """Batch sizes to add beyond either end of the grid, with why."""
    if not fit.ok or fit.b_noise_ci is None:
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


def _priorities(
    views: Sequence[StratumView], fit: NoiseScaleFit
) -> tuple[dict[Stratum, float], dict[Stratum, str], list[StratumView]]:
    """Each stratum's priority and reason; the strata that get nothing (past maximal data
    parallelism, and consistent with the fit there)."""
    scores: dict[Stratum, float] = {}
    reasons: dict[Stratum, str] = {}
    skipped: list[StratumView] = []
    for view, (score, reason) in zip(views, _scores(views, fit), strict=True):
        if score is None:
            skipped.append(view)
        else:
            scores[view.stratum] = score
        reasons[view.stratum] = reason
    return scores, reasons, skipped


def _scores(views: Sequence[StratumView], fit: NoiseScaleFit) -> list[tuple[float | None, str]]:
    """Per view (in order): its priority (None: no more trials) and why.

    Steps to result is a best over trials, so more trials can only lower it: a stratum whose
    best lies above the fitted curve, or above the best of a smaller batch size (steps never
    grow with the batch size), is likely under-searched and counts that gap (in log units,
    `UNDER_SEARCHED` times) on top of the width of the fit's interval of steps there.
    """
    sizes = np.array([v.stratum.batch_size for v in views], dtype=float)
    band = fit.steps_band(sizes) if fit.ok else None
    upper = fit.b_noise_ci[1] if fit.ok and fit.b_noise_ci else math.inf
    out: list[tuple[float | None, str]] = []
    for i, view in enumerate(views):
        if view.at_edge:
            low, high = view.searched or (math.nan, math.nan)
            out.append(
                (
                    EDGE_PRIORITY,
                    f"best learning rate {view.best_lr:.3g} at the edge of its searched range "
                    f"{low:.3g} to {high:.3g}",
                )
            )
            continue
        if not math.isfinite(view.best_steps):
            out.append((UNREACHED_PRIORITY, "no trial has reached the target yet"))
            continue
        if band is None:
            out.append(
                (
                    1.0 / (1 + view.trials),
                    f"no fit yet ({fit.reason}): spread over the fewest-searched strata",
                )
            )
            continue
        smaller = [v.best_steps for v in views if v.stratum.batch_size < view.stratum.batch_size]
        rise = max(0.0, math.log(view.best_steps / min(smaller))) if smaller else 0.0
        above = max(0.0, math.log(view.best_steps / float(fit.predict_steps(sizes[i]))))
        width = float(np.log(band[1][i] / band[0][i]))
        width = width if math.isfinite(width) else UNREACHED_PRIORITY / 2
        if sizes[i] > MAX_PARALLEL * upper and max(rise, above) < CONSISTENT:
            out.append(
                (
                    None,
                    f"past maximal data parallelism (B > {MAX_PARALLEL:g} x B_noise's upper "
                    f"end {upper:.3g}) and on the curve there: no more trials",
                )
            )
            continue
        gap = max(rise, above)
        if gap * UNDER_SEARCHED > width:
            what = "a smaller batch size's" if rise >= above else "the fitted curve's"
            reason = (
                f"its best steps {view.best_steps:.0f} lie x{math.exp(gap):.2f} above "
                f"{what} (more trials can only lower them)"
            )
        else:
            reason = (
                f"the fit's 95% interval of steps is wide here ({band[0][i]:.0f} to "
                f"{band[1][i]:.0f}, x{math.exp(width):.2f})"
            )
        out.append((width + UNDER_SEARCHED * gap, reason))
    return out


class Allocator:
    """An adaptive allocation over a study's run: its budgets by stratum, its rounds and their
    decisions, kept in the ledger. ``say`` prints a decision; ``track`` logs the state."""

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        total: int,
        say: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.total = total
        self.say = say
        self.track: Callable[[dict], None] | None = None
        self.round = 0
        self.budgets: dict[Stratum, int] = {}
        self.decisions: list[Decision] = []

    @property
    def initial(self) -> int:
        """Trials a stratum gets when it joins the grid."""
        return max(1, math.ceil(self.config.trials_per_stratum * INITIAL_SHARE))

    def start(self, estimate: Callable[[], float]) -> dict[Stratum, int]:
        """The budgets to run first: as stored (a resumed run), else the grid around the
        pilot's B_simple (``estimate()``, asked only then: it may run the pilot) with
        `initial` trials each (round 0)."""
        if self._adopt_stored():
            return dict(self.budgets)
        b_simple = estimate()
        sizes = initial_grid(self.config.space.batch_sizes, b_simple)
        for strategy in self.config.space.strategies:
            for size in sorted(sizes, reverse=True):
                stratum = Stratum(size, strategy)
                self.budgets[stratum] = self.initial
                reason = (
                    f"within {SPAN:g}x of the pilot's B_simple {b_simple:.3g}"
                    if math.isfinite(b_simple)
                    else "no pilot estimate: the whole grid"
                )
                self._decide(Decision(0, str(stratum), self.initial, reason))
        self._save()
        return dict(self.budgets)

    def next_round(self) -> dict[Stratum, int] | None:
        """The budgets after the next round's decisions; None when the rounds or the budget
        are spent."""
        if self._adopt_stored(newer_only=True):  # another process opened the round
            return dict(self.budgets)
        left = self.total - sum(self.budgets.values())
        if self.round >= self.config.allocation.rounds or left <= 0:
            return None
        self.round += 1
        share = math.ceil(left / (self.config.allocation.rounds - self.round + 1))
        strategies = self.config.space.strategies
        for i, strategy in enumerate(strategies):
            trials = share // len(strategies) + (1 if i < share % len(strategies) else 0)
            views = [self._view(s) for s in self.budgets if s.strategy == strategy]
            for decision in plan_round(
                views,
                trials,
                self.round,
                candidates=self.config.space.batch_sizes,
                initial=self.initial,
            ):
                stratum = Stratum.parse(decision.stratum)
                self.budgets[stratum] = self.budgets.get(stratum, 0) + decision.trials
                self._decide(decision)
        self._save()
        return dict(self.budgets)

    def state(self) -> dict:
        return {
            "total": self.total,
            "round": self.round,
            "rounds": self.config.allocation.rounds,
            "budgets": {str(s): n for s, n in self.budgets.items()},
            "decisions": [asdict(d) for d in self.decisions],
        }

    def _adopt_stored(self, *, newer_only: bool = False) -> bool:
        """Take the state stored in the ledger (a resumed run, or another process's later
        round); whether there was one to take."""
        stored = self.ledger.allocation()
        if not stored or (newer_only and int(stored["round"]) <= self.round):
            return False
        self.round = int(stored["round"])
        self.budgets = {Stratum.parse(k): int(v) for k, v in stored["budgets"].items()}
        self.decisions = [Decision(**d) for d in stored["decisions"]]
        return True

    def _view(self, stratum: Stratum) -> StratumView:
        from study.tuners.history import read_history

        best = self.ledger.best(stratum)
        history = read_history(self.ledger, self.config, stratum, self.budgets.get(stratum))
        param = self.config.space.param("learning_rate")
        whole = (
            (min(param.choices), max(param.choices))
            if isinstance(param, CategoricalParam)
            else (param.low, param.high)
        )
        return StratumView(
            stratum,
            trials=len(self.ledger.counted(stratum)),
            best_steps=float(best.steps_to_target) if best and best.steps_to_target else math.inf,
            best_lr=best.learning_rate if best else None,
            searched=history.window or whole,
        )

    def _decide(self, decision: Decision) -> None:
        self.decisions.append(decision)
        self.say(decision.line())

    def _save(self) -> None:
        state = self.state()
        self.ledger.set_allocation(state)
        if self.track is not None:
            self.track(state)
