"""Results of pure functions of trials, kept while they are asked about the same trial objects.

A proposal reads every other batch size's best rate (`study.tuners.history.neighbours`), and
a decision and the designer read every trial as the model's frame
(`study.tuners.trial_frame.ledger_frame`): each a pass over every trial of the study. Between two
trials only the stratum that ran changes, and a closed trial reads back as the same
`LedgerTrial` object (the ledger decodes a closed trial once), so the pass over an
unchanged list of trials can be the last one's. Callers leave running trials out (each read
may decode one anew, and they count for none of these). The trials of the last call are kept,
so their ids cannot be taken by other objects while they serve as its key.

Example: ``best = SameTrials(best_rate)``; ``best(trials, stratum)`` computes once, and again
only when ``trials`` holds another object (a trial closed, added or read anew).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from study.ledger import LedgerTrial

__all__ = ["SameTrials"]

T = TypeVar("T")


class SameTrials(Generic[T]):
    """``compute(trials)``, kept per ``key`` (the latest ``keep`` keys) for the same objects."""

    def __init__(self, compute: Callable[[Sequence[LedgerTrial]], T], keep: int = 32) -> None:
        self._compute = compute
        self._keep = keep
        self._kept: OrderedDict[Hashable, tuple[tuple[int, ...], list[LedgerTrial], T]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def __call__(self, trials: Sequence[LedgerTrial], key: Hashable = None) -> T:
        ids = tuple(map(id, trials))
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0] == ids:
                self._kept.move_to_end(key)
                return kept[2]
        value = self._compute(trials)
        with self._lock:
            self._kept[key] = (ids, list(trials), value)
            self._kept.move_to_end(key)
            while len(self._kept) > self._keep:
                self._kept.popitem(last=False)
        return value
