"""The tuner contract: propose metaparameters for a stratum, hear how the trial went.

Tuners only propose (KerasTuner's Oracle/Tuner split): the runner claims the ledger slot, the
trainer trains, the ledger records. Every proposal is recorded in the ledger whichever backend
made it, so all backends learn from every trial.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import optuna

from study.config.study import StudyConfig
from study.ledger import UNCOUNTED, Ledger, Stratum
from study.results import TrialResult


@dataclass(frozen=True)
class Outcome:
    """A finished trial as the engine scored it (lower ``objective`` is better)."""

    result: TrialResult
    objective: float


@dataclass(frozen=True)
class Proposal:
    """Metaparameters for one trial and who proposed them.

    ``origin``: ``sampler`` (the backend's search), ``transfer`` (centred on what neighbouring
    batch sizes found) or ``retry`` (re-running an interrupted proposal). ``budget_fraction``
    below 1 asks for a shorter trial (Hyperband).
    """

    tuner: str
    params: Mapping[str, Any]
    origin: str = "sampler"
    budget_fraction: float = 1.0
    attrs: Mapping[str, Any] = field(default_factory=dict)
    handle: Any = field(default=None, compare=False, repr=False)


class TunerBackend(abc.ABC):
    """A search backend. Subclasses implement `propose`; `execute` and `report` are hooks."""

    name: ClassVar[str] = ""

    def __init__(self, config: StudyConfig, ledger: Ledger) -> None:
        self.config = config
        self.ledger = ledger

    @abc.abstractmethod
    def propose(
        self, stratum: Stratum, study: optuna.Study, trial: optuna.Trial
    ) -> Proposal | None:
        """Metaparameters for the claimed ledger ``trial`` (None: nothing to propose now)."""

    def execute(self, proposal: Proposal, run: Callable[[], Outcome]) -> Outcome:
        """Run the trial (a backend may wrap it, as KerasTuner's ``Tuner.run_trial`` does)."""
        return run()

    def report(self, proposal: Proposal, outcome: Outcome) -> None:  # noqa: B027
        """Hear the outcome of a trial this backend proposed."""

    def close(self) -> None:  # noqa: B027
        """Release resources (files, locks)."""


def transfer_learning_rate(
    neighbours: Sequence[tuple[int, float]], batch_size: int, low: float, high: float
) -> float | None:
    """A learning rate for ``batch_size`` centred on the best rates of other batch sizes.

    Interpolates log(lr) linearly in log(batch) between the nearest measured batch sizes on
    either side; beyond the measured range, extrapolates with the local slope clipped to
    [0, 1] (between "keep the rate" and the linear scaling rule). Clipped to [low, high].

    Example: best rates 0.01 at batch 32 and 0.04 at batch 128 give 0.02 at batch 64.
    """
    points = sorted((b, lr) for b, lr in neighbours if b != batch_size and lr > 0)
    if not points:
        return None
    below = [p for p in points if p[0] < batch_size]
    above = [p for p in points if p[0] > batch_size]
    if below and above:
        (b0, l0), (b1, l1) = below[-1], above[0]
        anchor = below[-1]
        slope = (math.log(l1) - math.log(l0)) / (math.log(b1) - math.log(b0))
    elif len(points) == 1:
        anchor, slope = points[0], 0.0
    else:
        (b0, l0), (b1, l1) = below[-2:] if below else above[:2]
        anchor = below[-1] if below else above[0]
        slope = (math.log(l1) - math.log(l0)) / (math.log(b1) - math.log(b0))
        slope = min(1.0, max(0.0, slope))
    lr = anchor[1] * (batch_size / anchor[0]) ** slope
    return min(high, max(low, lr))


#: The learning-rate search of a stratum centred by transfer spans this factor each way.
WINDOW_FACTOR = 10.0


def lr_window(ledger: Ledger, stratum: Stratum) -> tuple[float, float] | None:
    """The learning-rate range a stratum's search was centred on, if any (set by transfer)."""
    window = ledger.stratum_attrs(stratum).get("lr_window")
    return (float(window[0]), float(window[1])) if window else None


def centred_window(centre: float, low: float, high: float) -> tuple[float, float]:
    """``[centre / WINDOW_FACTOR, centre * WINDOW_FACTOR]`` clipped to ``[low, high]``.

    Example: centre 0.3 in [0.001, 3.0] gives (0.03, 3.0).
    """
    return max(low, centre / WINDOW_FACTOR), min(high, centre * WINDOW_FACTOR)


def neighbour_best(
    ledger: Ledger, config: StudyConfig, stratum: Stratum
) -> list[tuple[int, float]]:
    """(batch size, best learning rate) of the other batch sizes with the same strategy."""
    out = []
    for batch in config.space.batch_sizes:
        if batch == stratum.batch_size:
            continue
        best = None
        for t in ledger.trials(Stratum(batch, stratum.strategy)):
            if t.user_attrs.get("status") == "reached" and "learning_rate" in t.params:
                key = (t.user_attrs["steps_to_target"], t.params["learning_rate"])
                best = key if best is None or key < best else best
        if best is not None:
            out.append((batch, best[1]))
    return out


def finished_count(trials: Sequence[Any]) -> int:
    return sum(
        1 for t in trials if t.state.is_finished() and t.user_attrs.get("status") not in UNCOUNTED
    )


def clean_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Drop stratum coordinates and backend bookkeeping (``tuner/...``) from proposed values."""
    return {
        k: v
        for k, v in params.items()
        if k not in ("batch_size", "strategy") and not k.startswith("tuner/")
    }
