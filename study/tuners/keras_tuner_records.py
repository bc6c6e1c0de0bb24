"""What the KerasTuner backend (`keras_tuner_backend`, no KerasTuner import) and its oracle
(`keras_tuner_oracle`) share: the ledger extras of KerasTuner's trials, and a draw's request and
answer (plain records, so the oracle can run in another process)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from study.config.space import Stratum
from study.ledger import LedgerTrial

#: The ledger extra that links a trial to its KerasTuner trial.
KT_TRIAL = "keras_tuner_trial"
#: The ledger extra holding the learning-rate window a trial was drawn in.
LR_WINDOW = "lr_window"
#: The ledger extra holding a Hyperband trial's place: ``{"iteration", "bracket", "round",
#: "past"}`` (``past``: the KerasTuner id of the trial it continues, or None).
HYPERBAND = "hyperband"
#: Hyperband's ``max_epochs``: a trial's budget fraction is its round's epochs over this.
HYPERBAND_MAX_EPOCHS = 9


@dataclass(frozen=True)
class DrawRequest:
    """What a proposal is drawn from: the slot's stratum, number and learning-rate window, the
    stratum's trials (with this process's proposals not started yet) and the reserved points of
    trials whose params are not recorded yet (slot number -> point)."""

    stratum: Stratum
    window: tuple[float, float] | None
    number: int
    trials: tuple[LedgerTrial, ...]
    points: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Draw:
    """The oracle's proposal: its values and, for Hyperband, ``extras`` with its place."""

    values: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)
