"""The tuner contract: propose metaparameters from a stratum's history, hear the outcome.

Tuners only propose (KerasTuner's Oracle/Tuner split): the runner claims the ledger slot, the
trainer trains, the ledger records. Every proposal is recorded in the ledger whichever backend
made it, and every backend learns from every finished trial of its stratum: Optuna's sampler
reads the ledger, KerasTuner's oracle is fed the trials it did not propose. `TunerBackend.adopt`
hears of another backend's proposal as it starts. No proposal repeats a point already run or
running in its stratum (`study.tuners.points.settle`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from study.config.space import Stratum
from study.config.study import StudyConfig
from study.ledger import Ledger, LedgerTrial, Slot
from study.ledger.records import Origin
from study.results import TrialResult
from study.tuners.transfer import BestRate


@dataclass(frozen=True)
class Outcome:
    """A finished trial as the engine scored it (lower ``objective`` is better)."""

    result: TrialResult
    objective: float


@dataclass(frozen=True)
class Proposal:
    """Metaparameters for one trial and who proposed them.

    ``origin``: ``sampler`` (the backend's search), ``transfer`` (the rate predicted from what
    other batch sizes found), ``retry`` (re-running an interrupted proposal), ``confirm`` (a
    stratum's best point again under another ``seed``; None: the study's seed), ``design`` (the
    model of every trial's) or ``warm`` (another study's best, ``tuner.warm_start``).
    ``budget_fraction`` below 1 asks for a shorter trial (Hyperband, capped confirmations).
    ``extras`` is bookkeeping the backend wants stored with the trial; ``handle`` is private to
    the backend.
    """

    tuner: str
    params: Mapping[str, Any]
    origin: Origin = "sampler"
    budget_fraction: float = 1.0
    extras: Mapping[str, Any] = field(default_factory=dict)
    handle: Any = field(default=None, compare=False, repr=False)
    seed: int | None = None


@dataclass(frozen=True)
class History:
    """What a backend proposes from: the stratum's trials so far, the learning-rate window its
    search is centred on (None: the whole range) and the predicted best rate ``centre`` (see
    `study.tuners.transfer.search_window`), the best learning rate found at each other batch
    size with the same strategy with the rates tried around it (`BestRate`), their steps to
    target as ``(batch size, steps)`` pairs in ``neighbour_steps``, and the stratum's
    ``budget`` of trials (None: unknown)."""

    stratum: Stratum
    trials: tuple[LedgerTrial, ...] = ()
    window: tuple[float, float] | None = None
    neighbours: tuple[BestRate, ...] = ()
    centre: float | None = None
    budget: int | None = None
    neighbour_steps: tuple[tuple[int, float], ...] = ()

    @property
    def finished(self) -> int:
        """Trials of the stratum that finished and count toward its budget."""
        return sum(1 for t in self.trials if not t.open and t.status.counts())


class TunerBackend(abc.ABC):
    """A search backend: `propose` is required; `execute`, `report`, `adopt` are hooks.

    Backends read and write the study only through the ``ledger``.
    """

    name: ClassVar[str] = ""

    def __init__(self, config: StudyConfig, ledger: Ledger) -> None:
        self.config = config
        self.ledger = ledger

    @abc.abstractmethod
    def propose(self, slot: Slot, history: History) -> Proposal | None:
        """Metaparameters for the claimed ``slot`` (None: nothing to propose now)."""

    def execute(self, proposal: Proposal, run: Callable[[], Outcome]) -> Outcome:
        """Run the trial (a backend may wrap it, as KerasTuner's ``Tuner.run_trial`` does)."""
        return run()

    def report(self, proposal: Proposal, outcome: Outcome) -> None:  # noqa: B027
        """Hear the outcome of a trial this backend proposed."""

    def adopt(self, slot: Slot, proposal: Proposal) -> None:  # noqa: B027
        """Hear that another backend's ``proposal`` took ``slot``."""

    def warm(self) -> None:  # noqa: B027
        """Start, in the background, what the first proposal needs (a process, say)."""

    def close(self) -> None:  # noqa: B027
        """Release resources (files, locks)."""


def clean_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Drop stratum coordinates and backend bookkeeping (``tuner/...``) from proposed values."""
    return {
        k: v
        for k, v in params.items()
        if k not in ("batch_size", "strategy") and not k.startswith("tuner/")
    }
