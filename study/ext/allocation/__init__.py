"""Allocation in rounds: the modes ``adaptive`` and ``steps`` of a study file's ``allocation``.

``allocation: {mode: adaptive, rounds: N}`` chooses the grid around a pilot's B_simple and gives
the rest of the even total in ``N`` rounds where B_noise's interval narrows most
(`study.ext.allocation.plan`); ``allocation: {mode: steps, steps: S}`` runs every batch size
first, then one trial a round where the answer narrows most per training step, within ``S``
steps (`study.ext.allocation.step_plan`). `study.ext.allocation.rounds` keeps the rounds (their
state in the ledger, one process deciding each) and `study.ext.allocation.pilot` measures the
pilot. The core knows neither mode: it reads ``allocation.mode`` against the modes the loaded
extensions add (`study.extension.allocation_modes`) and runs the allocator of the mode
(`study.runner.allocator.Allocator`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from study.extension import AllocationModeSpec, Extension, register


class Mode(str, enum.Enum):
    """The allocation modes this extension adds."""

    #: The grid around a pilot's B_simple, then the trials in rounds where the noise-scale fit
    #: is least certain.
    ADAPTIVE = "adaptive"
    #: Every batch size first, then one trial at a time where the model of every trial expects
    #: the answer to narrow most per training step, within a budget of training steps.
    STEPS = "steps"


#: The allocator of both modes (`study.ext.allocation.rounds.RoundAllocator`).
ALLOCATOR = "study.ext.allocation.rounds:RoundAllocator"


@register
class AllocationInRounds(Extension):
    """``allocation: {mode: adaptive}`` and ``{mode: steps}``: a study's trials in rounds."""

    name = "allocation"
    summary = "allocation in rounds: the modes adaptive and steps"

    def allocation_modes(self) -> Mapping[str, AllocationModeSpec]:
        return {
            Mode.ADAPTIVE.value: AllocationModeSpec(ALLOCATOR),
            Mode.STEPS.value: AllocationModeSpec(ALLOCATOR, spends_steps=True),
        }
