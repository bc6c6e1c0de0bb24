"""Confirmation trials: a stratum's best points run again under other seeds.

With ``tuner.confirm: {top: N, seeds: M}``, once a stratum has spent its search budget
(``trials_per_stratum``), its slots go to the `Confirmer`: the N best points found at the
study's seed (fewest steps to target, as `LedgerTrial.rank`) run again under the seeds
``seed + 1`` to ``seed + M``, one trial per (point, seed) pair, recorded with origin ``confirm``
and their ``seed``. They are never pruned; each is capped at `CAP` times the slowest steps its
point has taken so far (beyond that it cannot change the point's median of three). Its point is
reserved in the ledger like any proposal, so two processes never confirm the same pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from study.config.study import Confirmation
from study.ledger import LedgerTrial, Slot
from study.ledger.records import CONFIRM
from study.tuners.base import History, Proposal, TunerBackend, clean_params
from study.tuners.points import ROUNDS, SEED, clashes, others, point_of

#: The ledger extra naming the trial a confirmation trial repeats.
CONFIRMS = "confirms"
#: A confirmation trial stops after this many times its point's slowest steps so far.
CAP = 2.0


def search_budget(budget: int, confirm: Confirmation) -> int:
    """The trials of a stratum's ``budget`` left to the search: the rest confirms (at least 1).

    Example: a budget of 12 with ``top=2, seeds=2`` leaves 8 to the search.
    """
    return max(1, budget - confirm.trials)


def top_points(trials: Sequence[LedgerTrial], top: int) -> list[LedgerTrial]:
    """The ``top`` best reached trials at the study's seed, one per distinct point."""
    reached = sorted(
        (t for t in trials if t.steps_to_target is not None and SEED not in t.extras),
        key=LedgerTrial.rank,
    )
    chosen: list[LedgerTrial] = []
    for trial in reached:
        point = point_of(clean_params(trial.params))
        if not clashes(point, [point_of(clean_params(c.params)) for c in chosen]):
            chosen.append(trial)
        if len(chosen) == top:
            break
    return chosen


def slowest(trials: Sequence[LedgerTrial], trial: LedgerTrial) -> float:
    """The most steps ``trial``'s point took under any seed so far (its own steps at least)."""
    point = point_of(clean_params(trial.params))
    steps = [float(trial.steps_to_target or math.inf)]
    for t in trials:
        if t.result is None or SEED not in t.extras:
            continue
        if clashes(point, [point_of(clean_params(t.params))]):
            steps.append(float(t.steps_to_target) if t.steps_to_target else math.inf)
    return max(steps)


def _undecided(trial: LedgerTrial) -> bool:
    """A claimed slot whose proposal is not recorded yet (no origin: `Ledger.start` not run)."""
    return trial.open and trial.origin is None


class Confirmer(TunerBackend):
    """Proposes the confirmation trials of a stratum whose search budget is spent, at most
    `Confirmation.trials` of them however the best points move (else None)."""

    name = CONFIRM

    def propose(self, slot: Slot, history: History) -> Proposal | None:
        settings = self.config.tuner.confirm
        if not settings.enabled or history.budget is None:
            return None
        counted = [t for t in history.trials if t.number != slot.number and t.status.counts()]
        # A slot claimed after this one whose proposal is not recorded yet (another process's,
        # between its claim and its start) is decided after it, in claim order: counting it as
        # a search trial would make this one a confirmation and the last search slot a search.
        searched = [
            t
            for t in counted
            if SEED not in t.extras and not (_undecided(t) and t.number > slot.number)
        ]
        if len(searched) < search_budget(history.budget, settings):
            return None
        confirming = [t for t in counted if SEED in t.extras]
        if len(confirming) >= settings.trials:  # two processes' confirmations, one budget
            return None
        best = top_points(history.trials, settings.top)
        for attempt in range(ROUNDS):
            pair = self._free_pair(slot, best, settings, attempt)
            if pair is None:
                return None
            trial, seed = pair
            point = point_of(clean_params(trial.params), seed)
            self.ledger.tuning.reserve(slot, point)
            if not clashes(point, others(self.ledger, slot)):
                return self._proposal(slot, history, trial, seed)
        return None

    def _free_pair(
        self, slot: Slot, best: Sequence[LedgerTrial], settings: Confirmation, attempt: int = 0
    ) -> tuple[LedgerTrial, int] | None:
        """A (point, seed) pair no trial of the stratum runs or ran: the first, or after a
        clash (``attempt`` > 0) the one at the slot's own place among them, so that two
        processes that reserved the same pair at once pick different ones next."""
        taken = others(self.ledger, slot)
        free = [
            (trial, seed)
            for trial in best
            for seed in settings.seed_values(self.config.settings.seed)
            if not clashes(point_of(clean_params(trial.params), seed), taken)
        ]
        if not free:
            return None
        return free[(slot.number + attempt) % len(free) if attempt else 0]

    def _proposal(self, slot: Slot, history: History, trial: LedgerTrial, seed: int) -> Proposal:
        fraction = 1.0
        limit = self.config.settings.budget.step_limit(slot.stratum.batch_size)
        cap = CAP * slowest(history.trials, trial)
        if limit and math.isfinite(cap):
            fraction = min(1.0, math.ceil(cap) / limit)
        return Proposal(
            tuner=trial.tuner or self.name,
            params=clean_params(trial.params),
            origin=CONFIRM,
            budget_fraction=fraction,
            extras={SEED: seed, CONFIRMS: trial.number},
            seed=seed,
        )
