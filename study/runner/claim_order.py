"""The order in which a worker claims slots (`study.runner.engine.StudyEngine._claim`).

Strata are visited in the study's order (largest batch first). With transfer on they are
visited twice, half their search budget each (`first_pass`). With pruning, two rules keep a
study with several trials in flight as thrifty as one with one trial at a time:

- a trial bounds the next ones by its steps (`study.runner.pruning`), so while no trial of the
  study has reached the target (`bound_anywhere` is False) and one runs, a free worker waits
  for it instead of starting a trial that only the cap of `unbounded_cap` would stop (on the
  MNIST-1D MLP question with two workers, two first trials at once took 1,500 steps where
  one after the other took 66);
- a stratum whose only trials are running (`bound_pending`) comes after every other stratum
  with room: a second trial there would race nothing of its own stratum's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger
from study.ledger.records import best_of
from study.tuners.confirm import search_budget

__all__ = ["bound_anywhere", "bound_pending", "first_pass"]


def first_pass(config: StudyConfig, budget: int) -> int:
    """How many trials each stratum runs before any stratum runs more: half its search budget
    (rounded up) when learning rates transfer between batch sizes, so every stratum's later
    trials are centred on what all the others found, the first-visited ones too; the whole
    budget otherwise (each stratum is searched in one go).

    Example: 8 trials per stratum and transfer on: 4 in the first pass, 4 in the second.
    """
    if not config.tuner.transfer or len(config.space.batch_sizes) < 2:
        return budget
    return math.ceil(search_budget(budget, config.tuner.confirm) / 2)


def bound_pending(ledger: Ledger, stratum: Stratum) -> bool:
    """Whether a trial of ``stratum`` is running while none of its trials has reached the
    target: a second trial started there now would run to its looser bound."""
    trials = ledger.trials(stratum)
    if best_of(trials) is not None:
        return False
    return any(t.result is None and t.status.counts() for t in trials)


def bound_anywhere(ledger: Ledger, strata: Sequence[Stratum]) -> bool:
    """Whether a trial of any of ``strata`` has reached the target: every batch size's trials
    then have a bound (`study.tuners.history.step_bound`)."""
    return any(best_of(ledger.trials(stratum)) is not None for stratum in strata)
