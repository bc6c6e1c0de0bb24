"""The study's own notes in the ledger: its pilot, its throughput probe and its adaptive
allocation's state (typed in `study.ledger.notes`), each one JSON attribute of the study, and
the claims on the allocation's rounds.

A round is decided by one process only: it claims the round first (`StudyNotes.claim_round`: a
study named ``allocation:<study>#<its storage id>/round-<number>`` in the Optuna storage; a
study name is unique there, a database constraint or the order of the journal, so of
processes claiming at once exactly one creates it). The storage id keeps a study deleted and
made anew under the same name from meeting its predecessor's claims.

Only the latest claims are kept: a claim of round ``n`` deletes that of round ``n - KEPT_CLAIMS``
(a study's rounds would otherwise add a study to the storage each, and every read of its
studies would grow with them). A process claiming a round that old finds the allocation's
stored state past it (its deciding process stored round ``n - 1`` before it claimed ``n``),
and the allocator (`study.runner.allocator`) takes that state instead of deciding the round.

Example: the first ``ledger.notes.claim_round(2)`` is True, every later one False (until the
claim of round ``2 + KEPT_CLAIMS`` deletes it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import optuna

from study.ledger.access import StorageAccess
from study.ledger.notes import AllocationState, Pilot, ThroughputRow
from study.ledger.records import StudyRecord

#: The study attribute holding the throughput probe's rows (JSON).
_THROUGHPUT = "throughput_probe"
#: The study attribute holding the noise-scale pilot's result (JSON).
_PILOT = "noise_scale_pilot"
#: The study attribute holding an adaptive allocation's state (JSON).
_ALLOCATION = "adaptive_allocation"
#: The round claims kept (see the module docstring).
KEPT_CLAIMS = 2


class StudyNotes:
    """One study's notes (see the module docstring); ``require`` gives the study's record
    or raises `UsageError` when no such study is stored (nothing is written then)."""

    def __init__(self, access: StorageAccess, require: Callable[[], StudyRecord]) -> None:
        self._access = access
        self._require = require

    # -- noise-scale pilot (`study noise-scale --study NAME`) -------------------------------
    def set_pilot(self, pilot: Pilot) -> None:
        """Store a pilot's result, replacing any stored before.

        Raises:
            UsageError: no study of this name is stored.
        """
        self._set(_PILOT, pilot.to_stored())

    def pilot(self) -> Pilot | None:
        """The pilot as `set_pilot` stored it, or None when none was stored."""
        raw = self._get(_PILOT)
        return Pilot.from_stored(raw) if raw else None

    # -- throughput probe (`study probe`) ---------------------------------------------------
    def set_throughput(self, rows: Sequence[ThroughputRow]) -> None:
        """Store the probe's rows, replacing any stored before.

        Raises:
            UsageError: no study of this name is stored.
        """
        self._set(_THROUGHPUT, [row.to_stored() for row in rows])

    def throughput(self) -> list[ThroughputRow]:
        """The probe's rows as `set_throughput` stored them (empty when none was stored)."""
        return [ThroughputRow.from_stored(row) for row in self._get(_THROUGHPUT) or ()]

    # -- allocation in rounds (an extension's `study.runner.allocator.Allocator`) ----------
    def set_allocation(self, state: AllocationState) -> None:
        """Store an adaptive allocation's state, so a resumed run continues its rounds.

        Raises:
            UsageError: no study of this name is stored.
        """
        self._set(_ALLOCATION, state.to_stored())

    def allocation(self) -> AllocationState | None:
        """The adaptive allocation's state as `set_allocation` stored it, or None."""
        raw = self._get(_ALLOCATION)
        return AllocationState.from_stored(raw) if raw else None

    def claim_round(self, number: int) -> bool:
        """Claim the deciding of round ``number`` of the adaptive allocation: whether this
        process won (see the module docstring)."""
        try:
            self._access.storage.create_new_study(
                [optuna.study.StudyDirection.MINIMIZE], self._claim_name(number)
            )
        except optuna.exceptions.DuplicatedStudyError:
            return False
        if number > KEPT_CLAIMS:  # the claim of an old round (see the module docstring)
            with contextlib.suppress(KeyError):
                storage = self._access.storage
                old = self._claim_name(number - KEPT_CLAIMS)
                storage.delete_study(storage.get_study_id_from_name(old))
        return True

    def _claim_name(self, number: int) -> str:
        access = self._access
        return f"allocation:{access.name}#{access.study_id(access.name)}/round-{number}"

    def round_claims(self) -> list[str]:
        """The names of the studies that hold this study's round claims (to delete them)."""
        access = self._access
        with contextlib.suppress(KeyError):
            prefix = f"allocation:{access.name}#{access.study_id(access.name)}/"
            names = [s.study_name for s in access.storage.get_all_studies()]
            return [n for n in names if n.startswith(prefix)]
        return []

    def _set(self, key: str, value: Any) -> None:
        self._require()
        stored = json.dumps(value, allow_nan=False)
        access = self._access
        access.storage.set_study_user_attr(access.study_id(access.name), key, stored)

    def _get(self, key: str) -> Any:
        raw = (self._access.study_attrs(self._access.name) or {}).get(key)
        return json.loads(raw) if raw else None
