"""Allocation in rounds: what the engine asks of an allocation mode other than even, and how
a run finds the mode's allocator.

``allocation: {mode: even}`` (the default) gives every stratum ``trials_per_stratum`` trials
and needs no allocator. Every other mode comes from an extension (`study.extension`:
`Extension.allocation_modes`; the built-in ``allocation`` extension adds ``adaptive`` and
``steps``) as a subclass of `Allocator`: `study.runner.launch` builds it (`allocator_class`)
and starts it, and the `study.runner.engine.StudyEngine` asks it for a next round whenever
every budget is spent and no trial is open.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from study.config.sections import allocation_mode
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.yaml_reader import Reader
from study.ledger import Ledger

if TYPE_CHECKING:  # pragma: no cover
    from study.runner.pool import WorkerPool
    from study.tracking.study_tracker import StudyTracker

__all__ = ["Allocator", "allocator_class"]


class Allocator(abc.ABC):
    """Gives a study's ``total`` trials in rounds: the budgets to start with (`start`), then
    one round at a time (`next_round`). ``say`` prints a decision."""

    def __init__(
        self,
        config: StudyConfig,
        ledger: Ledger,
        total: int,
        say: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self.total = total
        self.say = say

    @abc.abstractmethod
    def start(self, pool: WorkerPool) -> dict[Stratum, int]:
        """The budgets to run first, by stratum in visiting order (a resumed run's as its
        rounds left them); ``pool`` runs what the mode measures before the study (a pilot)."""

    @abc.abstractmethod
    def next_round(self, *, in_flight: bool = False) -> dict[Stratum, int] | None:
        """The budgets after the next round, or None when there is none. ``in_flight``: this
        process still runs trials (asked only of an allocator that `decides_in_flight`)."""

    @property
    def decides_in_flight(self) -> bool:
        """Whether a round may be decided while this process's trials run (the engine then
        asks for it before waiting for them)."""
        return False

    def exhausted(self) -> bool:
        """Whether a budget of the allocation's own (not its trials: training steps, say) is
        spent: no trial may start, and `close` takes the untaken slots back."""
        return False

    def close(self) -> dict[Stratum, int]:
        """Once `exhausted`: the budgets, each cut to the trials its stratum has (none by
        default: an allocator that is never exhausted takes nothing back)."""
        return {}

    def follow(self, tracker: StudyTracker) -> None:  # noqa: B027 - optional hook
        """Log the allocation on the study's MLflow run (``tracker``'s), now and at every
        change (nothing by default)."""


def allocator_class(config: StudyConfig) -> type[Allocator] | None:
    """The allocator of the study's ``allocation.mode``: None for even, else the class the
    loaded extension that adds the mode names.

    Raises:
        UsageError: ``FILE: allocation.mode 'steps' needs the extension 'allocation' (...)``
            when that extension is not loaded (`study.config.sections.allocation_mode`).
        TypeError: the extension names something other than an `Allocator`.
    """
    if not config.allocation.rounds_of:
        return None
    mode, spec = allocation_mode(Reader(config.source), str(config.allocation.mode))
    assert spec is not None, mode  # every mode but even has one
    module, _, name = spec.allocator.partition(":")
    found = getattr(importlib.import_module(module), name)
    if not (isinstance(found, type) and issubclass(found, Allocator)):
        raise TypeError(f"allocation mode {mode!r}: {spec.allocator} is no Allocator")
    return found
