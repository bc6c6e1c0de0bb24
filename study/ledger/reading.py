"""Reading a study's trials back as `LedgerTrial` records: its strata, a stratum's trials
(all, counted, best, the budget they leave) and every trial's measurement rows.

What a reader inside `StorageAccess.recent` reads is a recent read of the stratum where one
is at hand; a trial this process wrote reads as it wrote it (`StorageAccess.with_held`).

Example: after two claims of a stratum with a budget of 3, ``reader.taken(stratum, 3)`` is 2
and ``reader.remaining(stratum, 3)`` is 1.
"""

from __future__ import annotations

import math
from typing import Any

from study.config.space import Stratum
from study.ledger.access import StorageAccess
from study.ledger.records import LedgerTrial, best_of, decode_curve, merge_stored
from study.results import TrialState


class TrialReader:
    """One study's trials as `LedgerTrial` records, read through ``access`` (see the module
    docstring)."""

    def __init__(self, access: StorageAccess) -> None:
        self._access = access

    def strata(self) -> list[Stratum]:
        """The strata stored for this study (by its `StratumNaming`), by strategy then batch
        size."""
        access = self._access
        named = [
            access.naming.of(access.name, s.study_name, s.user_attrs)
            for s in access.learn_studies()  # their ids too: no lookup later
        ]
        found = [stratum for stratum in named if stratum is not None]
        return sorted(found, key=lambda s: (s.strategy, s.batch_size))

    def trials(self, stratum: Stratum) -> list[LedgerTrial]:
        """Every trial of a stratum, in number order (empty before the stratum exists)."""
        return self._access.decode_all(stratum, self._access.frozen(stratum))

    def fresh_trials(self, stratum: Stratum) -> list[LedgerTrial]:
        """`trials` as read less than `access.FRESH_S` ago (e.g. by the last claim), else read
        now."""
        known = self._access.fresh(stratum)
        frozen = known if known is not None else self._access.frozen(stratum)
        return [self._access.decode(stratum, t) for t in frozen]

    def trial(self, stratum: Stratum, number: int) -> LedgerTrial:
        frozen = self._access.storage.get_trial(self._access.trial_id(stratum, number))
        return self._access.decode(stratum, self._access.with_held([frozen])[0])

    def counted(self, stratum: Stratum) -> list[LedgerTrial]:
        """Trials that consume budget: finished or running, not interrupted or discarded."""
        return [t for t in self.trials(stratum) if t.status.counts()]

    def taken(self, stratum: Stratum, budget: int) -> int:
        """How many of the stratum's ``budget`` slots are taken (`counted`): inside `recent`
        from a recent read, unless that says they all are (then read afresh: a slot may have
        been freed since, e.g. a trial recovered as interrupted; a read less than `FRESH_S`
        old is afresh already)."""
        taken = len(self.counted(stratum))
        access = self._access
        if taken >= budget and access.in_recent() and not access.fresh(stratum):
            access.forget_read(stratum)
            taken = len(self.counted(stratum))
        return taken

    def remaining(self, stratum: Stratum, budget: int) -> int:
        return max(0, budget - len(self.counted(stratum)))

    def best(self, stratum: Stratum) -> LedgerTrial | None:
        """The stratum's best reached trial (see `records.best_of`), or None."""
        return best_of(self.trials(stratum))

    def measurement_rows(
        self, *, include_running: bool = True
    ) -> list[tuple[LedgerTrial, list[dict[str, Any]]]]:
        """Every trial of the study with its stored measurement rows, in start order.

        Interrupted and discarded trials are left out (they are not trials of the study);
        running ones unless ``include_running`` is False.
        """
        found = []
        for stratum in self.strata():
            for frozen in self._access.frozen(stratum):
                t = self._access.decode(stratum, frozen)
                if not t.status.counts() or (
                    t.status is TrialState.RUNNING and not include_running
                ):
                    continue
                start = t.started_at if t.started_at is not None else math.inf
                stored = merge_stored(frozen.user_attrs, frozen.system_attrs)
                found.append((start, str(stratum), t.number, t, decode_curve(stored)))
        found.sort(key=lambda item: item[:3])
        return [(t, rows) for *_, t, rows in found]
