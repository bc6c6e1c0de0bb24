"""What a trainer worker is asked to run for branch trials, and what it hands back.

A `ReferenceJob` trains one run at ``B0`` and saves its whole state at each checkpoint; a
`BranchJob` loads one of those states and trains a window at another batch size. States
travel as bytes (`Checkpoint.blob`: the model's and optimizer's variables, NumPy ``.npz``), so
the runner can keep them in the study's shared services (the MLflow artifact store) and a
worker on another host gets them from there; the trainer never sees a path. Each job is a
`study.runner.worker.Job`: `WorkerPool.run_job` sends it to a trainer worker, which runs it with
`study.ext.branch.trainer.run_job` (`RUNNER`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from study.config.trial import TrialSpec

__all__ = ["BranchJob", "BranchOutcome", "Checkpoint", "ReferenceJob", "ReferenceOutcome"]

#: What runs a job in a trainer worker (`study.runner.worker.Job.runner`).
RUNNER = "study.ext.branch.trainer:run_job"


@dataclass(frozen=True)
class ReferenceJob:
    """Train ``spec`` (at ``B0``) through the last of ``checkpoint_steps`` (and on to
    ``end_step``), evaluating on the settings' cadence (for steps to the target and the
    progress after each checkpoint) and at every checkpoint, where its state is saved."""

    spec: TrialSpec
    checkpoint_steps: tuple[int, ...]
    #: Train on to this step (evaluating on the cadence) after the last checkpoint; None: stop
    #: there.
    end_step: int | None = None
    #: Past ``end_step``, train on until the target is first met, up to this step (None: stop
    #: at ``end_step``): the reference then reaches the target, the unit of its cost.
    until_target: int | None = None
    #: Give BatchNorm layers the statistics of fixed training examples before each evaluation,
    #: as the branches do (`BranchJob.recalibrate`): the progress a branch's tolerance is a share
    #: of is then read the way the branches are.
    recalibrate: bool = False

    label: ClassVar[str] = "branch trials"
    runner: ClassVar[str] = RUNNER

    def failed(self, error: str) -> ReferenceOutcome:
        return ReferenceOutcome(error=error)


@dataclass(frozen=True)
class Checkpoint:
    """The reference run's state after ``step`` steps (``examples`` seen): its evaluation,
    mean training loss since the previous checkpoint, the noise scale estimate there, and the
    saved variables (``blob``; empty once it is stored elsewhere)."""

    index: int
    step: int
    examples: int
    metrics: Mapping[str, float]
    train_loss: float
    noise: Mapping[str, float] = field(default_factory=dict)
    blob: bytes = field(default=b"", repr=False)


@dataclass(frozen=True)
class ReferenceOutcome:
    """A finished reference run: its checkpoints, its curve on the cadence (rows of step,
    examples, train_loss and metrics), the first step the target was met (None: never), its
    training seconds; ``error`` when it failed."""

    checkpoints: tuple[Checkpoint, ...] = ()
    curve: tuple[Mapping[str, float], ...] = ()
    steps_to_target: int | None = None
    train_seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class BranchJob:
    """From the state ``blob`` (a reference checkpoint), train ``steps`` steps of ``spec``
    (its batch size, learning rate and seed: the example order of the window), then evaluate:
    ``evaluations`` times, evenly over the window's last quarter, the metrics averaged (one:
    at its end only), BatchNorm's statistics first recalibrated when ``recalibrate``."""

    spec: TrialSpec
    steps: int
    blob: bytes = field(repr=False)
    evaluations: int = 1
    #: Give BatchNorm layers the statistics of fixed training examples before each evaluation.
    recalibrate: bool = False

    label: ClassVar[str] = "branch trials"
    runner: ClassVar[str] = RUNNER

    def failed(self, error: str) -> BranchOutcome:
        return BranchOutcome(error=error)


@dataclass(frozen=True)
class BranchOutcome:
    """A branch's end: its evaluation after the window, its mean training loss over the
    window's last quarter, steps and training seconds; ``error`` when it failed."""

    metrics: Mapping[str, float] = field(default_factory=dict)
    train_loss: float = float("nan")
    steps: int = 0
    train_seconds: float = 0.0
    error: str | None = None
