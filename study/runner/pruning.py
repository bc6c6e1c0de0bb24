"""Pruning: a trial still short of the target after ``tuner.prune_slack`` times its stratum's
best steps so far is stopped (``pruned``). At 1 it is stopped as soon as it can no longer win its
stratum; above 1 the trials near the best finish too, and their exact crossings are what the
model of every trial reads S(B) from at the largest batch sizes (a pruned trial only says "more
than N steps").

The best is read from the ledger (so trials of other processes count) at most every few
seconds, and lowered at once by trials this process finishes.
"""

from __future__ import annotations

import math
import threading
import time

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger
from study.runner.step_limit import StepLimit
from study.tuners.base import History, Proposal
from study.tuners.history import SCALING_SLACK, step_bound

#: How long a stratum's best read from the ledger is trusted before it is read again.
REFRESH_SECONDS = 5.0

#: With a budget of training steps (``allocation.steps``), a trial that nothing bounds yet (no
#: trial of any batch size has reached the target) stops at this share of a stratum's part of
#: it (`unbounded_cap`).
UNBOUNDED_SHARE = 0.5


class Pruning:
    """The stratum bests that measurement hooks compare against."""

    def __init__(
        self, ledger: Ledger, refresh: float = REFRESH_SECONDS, slack: float = 1.0
    ) -> None:
        self.ledger = ledger
        self.refresh = refresh
        self.slack = slack
        self._best: dict[Stratum, tuple[float, float]] = {}  # stratum -> (steps, read at)
        self._lock = threading.Lock()

    def best(self, stratum: Stratum) -> float:
        """Fewest steps to target known for ``stratum`` (inf if none)."""
        now = time.monotonic()
        with self._lock:
            cached = self._best.get(stratum)
        if cached is not None and now - cached[1] <= self.refresh:
            return cached[0]
        trial = self.ledger.best(stratum)
        read = math.inf if trial is None else float(trial.steps_to_target or math.inf)
        with self._lock:
            old = self._best.get(stratum, (math.inf, 0.0))[0]
            self._best[stratum] = (min(read, old), now)
            return min(read, old)

    def note(self, stratum: Stratum, steps: float) -> None:
        """A trial of this process reached the target in ``steps``."""
        with self._lock:
            old, at = self._best.get(stratum, (math.inf, time.monotonic()))
            self._best[stratum] = (min(old, steps), at)

    def hook(self, stratum: Stratum) -> StepLimit:
        """The trainer's measurement hook: go on while the step is below ``slack`` times the
        stratum's best."""
        return StepLimit(lambda: self.slack * self.best(stratum))


def unbounded_cap(config: StudyConfig) -> float:
    """The most steps a trial that nothing bounds may take: `UNBOUNDED_SHARE` of the study's
    budget of training steps over its strata (``allocation.steps``; ``inf`` without one).

    A study's first trials have no best to lose to: at batch 1024 of the MNIST-1D MLP question
    (21,000 steps, 7 batch sizes, trials of up to 5,000 steps) two first trials at rates 0.0012
    and 2.04, which never reached the target, took 10,000 of the 21,000 steps, and the study
    ended after 14 trials. Half a stratum's share (1,500 steps there) still covers the slowest
    batch size's best trial of a budget that affords its strata (about 1,500 steps at batch 16).

    Example: ``allocation: {mode: steps, steps: 21000}`` over 7 batch sizes gives 1500.
    """
    steps = config.allocation.steps
    if steps is None:
        return math.inf
    return UNBOUNDED_SHARE * steps / max(1, len(config.strata))


def trial_hook(
    pruning: Pruning | None,
    stratum: Stratum,
    proposal: Proposal,
    history: History,
    cap: float = math.inf,
) -> StepLimit | None:
    """The pruning rule of a trial, as a `StepLimit`: stop it once it has taken its slack times
    its stratum's best steps (`Pruning`), or, before the stratum has one, `SCALING_SLACK` times
    the most the other batch sizes' results allow (`step_bound`), or, before any batch size has
    one, at ``cap`` steps (`unbounded_cap`). None without pruning, and for a trial under another
    seed (a confirmation is not racing the stratum's best)."""
    if pruning is None or proposal.seed is not None:
        return None
    bound = step_bound(stratum.batch_size, history.neighbour_steps, SCALING_SLACK)
    if not math.isfinite(bound) and not math.isfinite(cap):
        return pruning.hook(stratum)

    def limit() -> float:
        best = pruning.best(stratum)
        own = pruning.slack * best
        if math.isfinite(bound):
            return min(bound, own)
        return own if math.isfinite(best) else min(cap, own)  # the cap, until a best

    return StepLimit(limit)
