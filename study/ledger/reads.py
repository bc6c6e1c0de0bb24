"""The last read of each stratum this process keeps (`StorageAccess.frozen` serves it to the
readers inside `StorageAccess.recent`), kept true to what this process itself wrote.

A read is kept as the storage gave it, then amended by this process's own changes: a trial it
closed is closed in the kept read (`closed`), a stratum it claimed in is read afresh
(`forget`). A read under way when this process changes its stratum began before the change,
so it is not kept (`keep`): kept, it would undo the change for the readers after it. Each
stratum's changes are counted (a generation); a read is kept only if none came while it ran.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from optuna.trial import FrozenTrial

K = TypeVar("K")


class KeptReads(Generic[K]):
    """Each key's last read (monotonic time, trials), safe to use from many threads."""

    def __init__(self, trial_id: Callable[[FrozenTrial], int]) -> None:
        self._trial_id = trial_id
        self._reads: dict[K, tuple[float, list[FrozenTrial]]] = {}
        self._generation: dict[K, int] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> tuple[float, list[FrozenTrial]] | None:
        """The last read kept of ``key``, if any."""
        return self._reads.get(key)

    def generation(self, key: K) -> int:
        """How many changes of ``key`` this process made: taken before a read, for `keep`."""
        return self._generation.get(key, 0)

    def keep(self, key: K, generation: int, at: float, trials: list[FrozenTrial]) -> bool:
        """Keep a read of ``key`` made at ``at`` that began at ``generation``, unless this
        process changed ``key`` since; whether it was kept."""
        with self._lock:
            if self._generation.get(key, 0) != generation:
                return False
            self._reads[key] = (at, trials)
            return True

    def forget(self, key: K) -> None:
        """Read ``key`` afresh next time; a read of it under way is not kept."""
        with self._lock:
            self._changed(key)
            self._reads.pop(key, None)

    def closed(self, key: K, now: FrozenTrial) -> None:
        """This process closed the trial ``now`` of ``key``: the kept read has it so (the rest
        of that read is as old as it was); a read of it under way is not kept."""
        with self._lock:  # two threads closing trials of one key keep both
            self._changed(key)
            last = self._reads.get(key)
            if last is not None:
                closed = self._trial_id(now)
                trials = [now if self._trial_id(t) == closed else t for t in last[1]]
                self._reads[key] = (last[0], trials)

    def _changed(self, key: K) -> None:
        self._generation[key] = self._generation.get(key, 0) + 1
