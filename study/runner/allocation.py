"""Allocation in rounds over a study's run. Adaptive: a grid of strata around the pilot's
B_simple, then rounds that give the rest of the budget where it narrows B_noise's interval most
(the plan: `study.runner.allocation_plan`). By steps: every stratum of the grid first, then one
trial a round where the answer narrows most per training step, within the study's steps (the
plan: `study.runner.step_plan`).

Every decision says why (`Decision.reason`, with the stratum's trials so far); the engine prints
it and the tracker logs the state (``allocation.json`` on the study's MLflow run). The state is
kept in the ledger (``ledger.notes.set_allocation``, an `AllocationState`), so a resumed run
continues its rounds. A round is decided by one process only: it claims the round first
(``ledger.notes.claim_round``, which only one writer can win), and a process that loses the
claim waits for the winner's state and takes it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from study.analysis.pilot import SPAN
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.ledger import AllocationState, Decision, Ledger
from study.runner.allocation_plan import (
    INITIAL_SHARE,
    LEAST_TRIALS,
    StratumView,
    initial_grid,
    plan_round,
    tried_range,
)
from study.runner.step_plan import MOST_SHARES, StepView, in_flight_steps, plan_step
from study.tuners.design import ledger_frame
from study.tuners.points import lr_range

#: Seconds a process that lost a round's claim waits for the winner's decisions before it
#: decides the round itself (the winner died between its claim and its write).
CLAIM_WAIT = 60.0


class Allocator:
    """An adaptive allocation over a study's run: its budgets by stratum, its rounds and their
    decisions, kept in the ledger. ``say`` prints a decision; ``track`` logs the state;
    ``sleep`` waits while another process decides a round."""

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        total: int,
        say: Callable[[str], None] = print,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.total = total
        self.say = say
        self.sleep = sleep
        self.track: Callable[[AllocationState], None] | None = None
        self.round = 0
        self.budgets: dict[Stratum, int] = {}
        self.decisions: list[Decision] = []
        #: Why the allocation ended before its total ("" while it has not).
        self.closed = ""

    @property
    def initial(self) -> int:
        """Trials a stratum gets when it joins the grid, and needs before it counts in the fit:
        `INITIAL_SHARE` of ``trials_per_stratum``, at least `LEAST_TRIALS`, at most all of it.

        Example: 4 trials per stratum give 3; 8 give 4; 2 give 2.
        """
        share = math.ceil(self.config.trials_per_stratum * INITIAL_SHARE)
        return max(1, min(self.config.trials_per_stratum, max(LEAST_TRIALS, share)))

    def start(self, estimate: Callable[[], float]) -> dict[Stratum, int]:
        """The budgets to run first: as stored (a resumed run), else (adaptive) the grid around
        the pilot's B_simple (``estimate()``, asked only then: it may run the pilot) or (by
        steps) the whole grid, with `initial` trials each (round 0)."""
        if self._adopt_stored():
            return dict(self.budgets)
        if self.config.allocation.by_steps:
            b_simple = math.nan
            sizes: tuple[int, ...] = tuple(self.config.space.batch_sizes)
        else:
            b_simple = estimate()
            sizes = initial_grid(self.config.space.batch_sizes, b_simple)
        for strategy in self.config.space.strategies:
            for size in sorted(sizes, reverse=True):
                stratum = Stratum(size, strategy)
                self.budgets[stratum] = self.initial
                if self.config.allocation.by_steps:
                    reason = (
                        "every batch size first (the rest go where the answer narrows most "
                        f"per step, within {self.config.allocation.steps:,} training steps)"
                    )
                elif math.isfinite(b_simple):
                    reason = f"within {SPAN:g}x of the pilot's B_simple {b_simple:.3g}"
                else:
                    reason = "no pilot estimate: the whole grid"
                self._decide(Decision(0, str(stratum), self.initial, reason))
        self._save()
        return dict(self.budgets)

    def next_round(self, *, in_flight: bool = False) -> dict[Stratum, int] | None:
        """The budgets after the next round's decisions; None when the rounds or the budget
        are spent. Only the process that claims the round (``ledger.notes.claim_round``)
        decides it; another takes its decisions from the ledger.

        By steps, ``in_flight``: this process still runs trials, and the round is decided from
        the trials finished so far (their expected steps count as spent); a plan to stop
        then decides nothing and gives None (the running trials may change it: ask again
        once one ends)."""
        if self._adopt_stored(newer_only=True):  # another process opened the round
            return dict(self.budgets)
        left = self.total - sum(self.budgets.values())
        if left <= 0 or self.stopped:
            return None
        if not self.config.allocation.by_steps and self.round >= self.config.allocation.rounds:
            return None
        number = self.round + 1
        if self.config.allocation.by_steps:
            with self.ledger.recent():  # the plan reads every stratum a few times
                decision, go = self._plan_step(number)
            if in_flight and not go:
                return None
            if not self._claim(number):
                return dict(self.budgets)  # the winner's decisions, taken
            self.round = number
            return self._apply_step(decision, go)
        if not self._claim(number):
            return dict(self.budgets)  # the winner's decisions, taken
        self.round = number
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

    @property
    def stopped(self) -> bool:
        """Whether the allocation ended before its total (by steps: its steps are spent)."""
        return bool(self.closed)

    @property
    def spends_steps(self) -> bool:
        """Whether this allocation has a budget of training steps (mode steps)."""
        return self.config.allocation.by_steps

    def steps_left(self) -> float:
        """By steps: the study's training steps not yet spent (inf for other modes)."""
        if not self.config.allocation.by_steps:
            return math.inf
        return float(self.config.allocation.steps or 0) - self.spent()

    def close(self) -> dict[Stratum, int]:
        """By steps, once the study's steps are spent: every stratum's budget cut to the trials
        it has (finished or running), each cut a decision of one last round (claimed as any
        round is); the budgets."""
        if self._adopt_stored(newer_only=True) or self.stopped:
            return dict(self.budgets)
        number = self.round + 1
        if not self._claim(number):
            return dict(self.budgets)  # the winner's decisions, taken
        self.round = number
        reason = self._spent_reason()
        cut = False
        for stratum, budget in list(self.budgets.items()):
            have = len(self.ledger.counted(stratum))
            if have < budget:
                self.budgets[stratum] = have
                self._decide(Decision(number, str(stratum), have - budget, reason))
                cut = True
        if not cut:
            last = max(self.budgets, key=lambda s: s.batch_size)
            self._decide(Decision(number, str(last), 0, reason))
        self.closed = reason
        self._save()
        return dict(self.budgets)

    def _spent_reason(self) -> str:
        return (
            f"the study's {self.config.allocation.steps:,} training steps are spent "
            f"({self.spent():,} so far): no more trials"
        )

    def spent(self) -> int:
        """The training steps of the study's trials so far (every state, pruned too)."""
        return sum(
            t.result.steps_run
            for stratum in self.budgets
            for t in self.ledger.trials(stratum)
            if t.result is not None
        )

    def _plan_step(self, number: int) -> tuple[Decision, bool]:
        """Round ``number`` of an allocation by steps: one trial where the answer narrows most
        per step within the steps left (`plan_step`), less the expected steps of the trials
        still running (`in_flight_steps`), or the decision to stop (False)."""
        config = self.config
        cap = MOST_SHARES * config.trials_per_stratum
        views, running = [], []
        for stratum in self.budgets:
            trials = self.ledger.trials(stratum)
            best = self.ledger.best(stratum)
            limit = config.settings.budget.step_limit(stratum.batch_size)
            views.append(
                StepView(
                    stratum,
                    trials=sum(t.status.counts() for t in trials),
                    best_steps=float(best.steps_to_target)
                    if best and best.steps_to_target
                    else math.inf,
                    most_steps=max((t.result.steps_run for t in trials if t.result), default=0),
                    limit=float(limit) if limit else math.inf,
                    share=config.trials_per_stratum,
                    cap=cap,
                )
            )
            running.append(sum(t.result is None and t.status.counts() for t in trials))
        pruning = config.tuner.pruning
        spare = self.steps_left()
        left = spare - in_flight_steps(views, running, pruning)
        if spare <= 0:
            return Decision(number, str(views[-1].stratum), 0, self._spent_reason()), False
        return plan_step(
            views,
            ledger_frame([t for s in self.budgets for t in self.ledger.trials(s)]),
            left=left,
            number=number,
            bounds=lr_range(config),
            pruning=pruning,
        )

    def _apply_step(self, decision: Decision, go: bool) -> dict[Stratum, int] | None:
        """Take a round's decision (`_plan_step`): the budgets, or None when it stops."""
        if go:
            stratum = Stratum.parse(decision.stratum)
            self.budgets[stratum] = self.budgets.get(stratum, 0) + decision.trials
        else:
            self.closed = decision.reason
        self._decide(decision)
        self._save()
        return dict(self.budgets) if go else None

    def state(self) -> AllocationState:
        return AllocationState(
            total=self.total,
            round=self.round,
            rounds=self.config.allocation.rounds,
            budgets=dict(self.budgets),
            decisions=tuple(self.decisions),
            closed=self.closed,
        )

    def _claim(self, number: int) -> bool:
        """Whether this process decides round ``number``: it claimed it, or the process that
        did stored nothing within `CLAIM_WAIT` (False: the winner's decisions were taken)."""
        if self.ledger.notes.claim_round(number):
            return True
        if self._await(number):
            return False
        self.say(
            f"allocation round {number}: claimed by another process, which stored no "
            f"decisions within {CLAIM_WAIT:g} s; deciding it here"
        )
        return True

    def _await(self, number: int) -> bool:
        """Wait (up to `CLAIM_WAIT` seconds) for another process's decisions of round
        ``number`` and take them; whether they came."""
        waited = 0.0
        while True:
            if self._adopt_stored(newer_only=True) and self.round >= number:
                return True
            if waited >= CLAIM_WAIT:
                return False
            self.sleep(0.25)
            waited += 0.25

    def _adopt_stored(self, *, newer_only: bool = False) -> bool:
        """Take the state stored in the ledger (a resumed run, or another process's later
        round); whether there was one to take."""
        stored = self.ledger.notes.allocation()
        if stored is None or (newer_only and stored.round <= self.round):
            return False
        self.round = stored.round
        self.budgets = dict(stored.budgets)
        self.decisions = list(stored.decisions)
        self.closed = stored.closed
        return True

    def _view(self, stratum: Stratum) -> StratumView:
        best = self.ledger.best(stratum)
        return StratumView(
            stratum,
            trials=len(self.ledger.counted(stratum)),
            best_steps=float(best.steps_to_target) if best and best.steps_to_target else math.inf,
            best_lr=best.learning_rate if best else None,
            searched=tried_range(self.ledger.trials(stratum)),
        )

    def _decide(self, decision: Decision) -> None:
        self.decisions.append(decision)
        self.say(decision.line())

    def _save(self) -> None:
        state = self.state()
        self.ledger.notes.set_allocation(state)
        if self.track is not None:
            self.track(state)
