"""The order in which a worker claims slots (`study.runner.engine.StudyEngine._claim`).

Strata are visited in the study's order (largest batch first). With transfer on they are
visited twice, half their search budget each (`first_pass`). Two rules keep a study with
several trials in flight close to one that runs one trial at a time:

- with pruning, a trial bounds the next ones by its steps (`study.runner.pruning`), so while
  no trial of the study has reached the target (`bound_anywhere` is False) and one runs, a
  free worker waits for it instead of starting a trial that only the cap of `unbounded_cap`
  would stop (on the MNIST-1D MLP question with two workers, batch 512's first trial beside
  batch 1024's ran 1,546 steps; after it, 1024's 66 steps bounded it);
- a stratum with a trial running (`running_in`) comes after every other stratum with room: a
  trial proposed there now would be proposed, and pruned, without that trial's outcome (with
  two workers, six runs of each benchmark question: B_noise covered the truth in 12 of 12 this
  way, 11 of 12 when only strata none of whose trials had reached the target waited).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger
from study.ledger.records import best_of
from study.tuners.confirm import search_budget

__all__ = ["bound_anywhere", "first_pass", "running_in"]


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


def running_in(ledger: Ledger, stratum: Stratum) -> bool:
    """Whether a trial of ``stratum`` is running: a trial proposed there now would be proposed
    without its outcome (the stratum's own history and best), so another stratum goes first."""
    return any(t.result is None and t.status.counts() for t in ledger.trials(stratum))


def bound_anywhere(ledger: Ledger, strata: Sequence[Stratum]) -> bool:
    """Whether a trial of any of ``strata`` has reached the target: every batch size's trials
    then have a bound (`study.tuners.history.step_bound`)."""
    return any(best_of(ledger.trials(stratum)) is not None for stratum in strata)
