"""Allocation in rounds over a study's run, the allocator of the modes this extension adds.
Adaptive: a grid of strata around the pilot's B_simple (`study.ext.allocation.pilot`), then
rounds that give the rest of the budget where it narrows B_noise's interval most (the plan:
`study.ext.allocation.plan`). By steps: every stratum of the grid first, then one trial a round
where the answer narrows most per training step, within the study's steps (the plan:
`study.ext.allocation.step_plan`).

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
from typing import TYPE_CHECKING

from study.analysis.pilot import SPAN
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.errors import UsageError
from study.ext.allocation import Mode
from study.ext.allocation.plan import (
    INITIAL_SHARE,
    LEAST_TRIALS,
    StratumView,
    initial_grid,
    plan_round,
    tried_range,
)
from study.ext.allocation.step_plan import MOST_SHARES, StepView, in_flight_steps, plan_step
from study.ledger import AllocationState, Decision, Ledger, LedgerTrial
from study.ledger.records import best_of
from study.runner.allocator import Allocator
from study.tuners.fit_ahead import fit_next, lagged_fit, lagged_frame
from study.tuners.points import lr_range
from study.tuners.same_trials import SameTrials

if TYPE_CHECKING:  # pragma: no cover
    from study.runner.pool import WorkerPool
    from study.tracking.study_tracker import StudyTracker

#: Seconds a process that lost a round's claim waits for the winner's decisions before it
#: decides the round itself (the winner died between its claim and its write).
CLAIM_WAIT = 60.0
#: Per stratum, its finished trials' best (`best_of`, as `Ledger.best` reads it) and training
#: steps, computed again only when they change (`SameTrials`): at thousands of trials each is
#: a pass over them at every round.
_BEST = SameTrials(best_of)
_STEPS = SameTrials(lambda trials: sum(t.result.steps_run for t in trials))


def _finished(trials: list[LedgerTrial]) -> list[LedgerTrial]:
    """The trials with a result (a running one is read anew each time and counts for none)."""
    return [t for t in trials if t.result is not None]


#: The latest decisions (after the grid's, round 0) the stored state keeps: a study of
#: thousands of rounds would otherwise write and read all of them at every round (each is
#: printed when made).
KEPT_DECISIONS = 200


class RoundAllocator(Allocator):
    """An allocation in rounds over a study's run (mode adaptive or steps): its budgets by
    stratum, its rounds and their decisions, kept in the ledger. ``say`` prints a decision;
    ``track`` logs the state; ``sleep`` waits while another process decides a round.

    Raises:
        UsageError: mode steps without its budget of training steps (``allocation.steps``), or
            that budget with mode adaptive.
    """

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        total: int,
        say: Callable[[str], None] = print,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(config, ledger, total, say)
        #: By steps (mode steps), else adaptive.
        self.by_steps = config.allocation.mode == Mode.STEPS.value
        if self.by_steps and config.allocation.steps is None:
            raise UsageError(
                "allocation.steps must be the study's budget of training steps, an integer "
                ">= 1, with mode steps (got None)"
            )
        if not self.by_steps and config.allocation.steps is not None:
            raise UsageError(
                f"allocation.steps is the budget of mode steps, not of mode "
                f"{config.allocation.mode} (set mode: steps, or remove steps)"
            )
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

    def start(self, pool: WorkerPool) -> dict[Stratum, int]:
        """`begin` with the pilot's B_simple as stored, or measured on ``pool``."""
        from study.ext.allocation.pilot import pilot_estimate

        return self.begin(lambda: pilot_estimate(self.config, self.ledger, pool))

    def begin(self, estimate: Callable[[], float]) -> dict[Stratum, int]:
        """The budgets to run first: as stored (a resumed run), else (adaptive) the grid around
        the pilot's B_simple (``estimate()``, asked only then: it may run the pilot) or (by
        steps) the whole grid, with `initial` trials each (round 0)."""
        if self._adopt_stored():
            return dict(self.budgets)
        if self.by_steps:
            b_simple = math.nan
            sizes: tuple[int, ...] = tuple(self.config.space.batch_sizes)
        else:
            b_simple = estimate()
            sizes = initial_grid(self.config.space.batch_sizes, b_simple)
        for strategy in self.config.space.strategies:
            for size in sorted(sizes, reverse=True):
                stratum = Stratum(size, strategy)
                self.budgets[stratum] = self.initial
                if self.by_steps:
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
        if not self.by_steps and self.round >= self.config.allocation.rounds:
            return None
        number = self.round + 1
        if self.by_steps:
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
        return self.by_steps

    @property
    def decides_in_flight(self) -> bool:
        """By steps: a round is decided while this process's trials run (`next_round`)."""
        return self.by_steps

    def exhausted(self) -> bool:
        """By steps: whether the study's steps are spent (each stratum read once)."""
        if not self.by_steps:
            return False
        with self.ledger.recent():
            return self.steps_left() <= 0

    def follow(self, tracker: StudyTracker) -> None:
        """The state on the study's MLflow run (``allocation.json``), now and at every save."""
        self.track = lambda state: log_allocation(tracker, state)
        log_allocation(tracker, self.state())

    def steps_left(self) -> float:
        """By steps: the study's training steps not yet spent (inf for other modes)."""
        if not self.by_steps:
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
        return sum(_STEPS(_finished(self.ledger.trials(s)), s) for s in self.budgets)

    def _plan_step(self, number: int) -> tuple[Decision, bool]:
        """Round ``number`` of an allocation by steps: one trial where the answer narrows most
        per step within the steps left (`plan_step`), less the expected steps of the trials
        still running (`in_flight_steps`), or the decision to stop (False)."""
        config = self.config
        cap = MOST_SHARES * config.trials_per_stratum
        views, running = [], []
        for stratum in self.budgets:
            trials = self.ledger.trials(stratum)
            best = _BEST(_finished(trials), stratum)  # the ledger's best, kept while the same
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
        prune_at = config.prune_factor
        spare = self.steps_left()
        left = spare - in_flight_steps(views, running, prune_at)
        if spare <= 0:
            return Decision(number, str(views[-1].stratum), 0, self._spent_reason()), False
        finished = [t for s in self.budgets for t in self.ledger.trials(s)]
        ahead = config.tuner.fit_ahead  # the model lags one trial: its fit ran while that trained
        decision, go = plan_step(
            views,
            lagged_frame(finished, ahead=ahead),
            left=left,
            number=number,
            bounds=lr_range(config),
            prune_at=prune_at,
            fit=lagged_fit(finished, ahead=ahead),
        )
        if go:
            fit_next(finished, ahead=ahead)  # the next round's model, fitted while this trains
        return decision, go

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
        """The state to store: the grid's decisions and the latest `KEPT_DECISIONS` others."""
        grid = [d for d in self.decisions if d.round == 0]
        later = [d for d in self.decisions if d.round != 0]
        if len(later) > KEPT_DECISIONS:
            self.decisions = grid + later[-KEPT_DECISIONS:]
        return AllocationState(
            total=self.total,
            round=self.round,
            rounds=self.config.allocation.rounds,
            budgets=dict(self.budgets),
            decisions=tuple(self.decisions),
            closed=self.closed,
        )

    def _claim(self, number: int) -> bool:
        """Whether this process decides round ``number``: it claimed it (and the stored state
        is not past it already: an old round's claim is deleted), or the process that did
        stored nothing within `CLAIM_WAIT` (False: the winner's decisions were taken)."""
        if self.ledger.notes.claim_round(number):
            return not (self._adopt_stored(newer_only=True) and self.round >= number)
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


def log_allocation(tracker: StudyTracker, state: AllocationState) -> None:
    """The allocation's state and decisions on the study's MLflow run (``allocation.json``)."""
    run_id = tracker.parent_run_id
    if run_id:
        stored = state.to_stored()
        tracker.submit(
            lambda: tracker.logger.client.log_dict(run_id, stored, "allocation.json"),
            key=f"{run_id}/allocation.json",  # a newer state queued meanwhile replaces it
        )
