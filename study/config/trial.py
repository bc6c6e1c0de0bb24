"""The specification of one trial: everything the trainer needs, validated once.

A `TrialSpec` is plain data (picklable, JSON-friendly through `to_params`), so the runner can hand
it to a worker process and the tracker can log it without touching TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from study.config.target import Target
from study.errors import UsageError

OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam")
SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimizer and its metaparameters.

    ``sgd`` is plain SGD (``momentum`` is ignored), ``momentum`` is heavy-ball SGD,
    ``nesterov`` is SGD with Nesterov momentum, ``adam`` uses ``beta1``, ``beta2``, ``epsilon``.
    """

    name: str = "nesterov"
    learning_rate: float = 0.1
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise UsageError(
                f"--optimizer: unknown optimizer {self.name!r}; choose from {', '.join(OPTIMIZERS)}"
            )
        _positive("--lr", self.learning_rate)
        _in_unit("--momentum", self.momentum, upper_open=True)
        _in_unit("--beta1", self.beta1, upper_open=True)
        _in_unit("--beta2", self.beta2, upper_open=True)
        _positive("--epsilon", self.epsilon)
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise UsageError(f"--weight-decay must be >= 0 (got {self.weight_decay})")


@dataclass(frozen=True)
class ScheduleSpec:
    """Learning-rate schedule: optional linear warmup, then constant, linear or cosine decay.

    Decay runs from the base rate to ``base * end_factor`` over ``decay_steps`` (after warmup);
    ``decay_steps=None`` means "until the step budget runs out".
    """

    name: str = "constant"
    warmup_steps: int = 0
    decay_steps: int | None = None
    end_factor: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in SCHEDULES:
            raise UsageError(
                f"--schedule: unknown schedule {self.name!r}; choose from {', '.join(SCHEDULES)}"
            )
        if self.warmup_steps < 0:
            raise UsageError(f"--warmup must be >= 0 steps (got {self.warmup_steps})")
        if self.decay_steps is not None and self.decay_steps < 1:
            raise UsageError(f"--decay-steps must be >= 1 (got {self.decay_steps})")
        _in_unit("--end-factor", self.end_factor, upper_open=False)


@dataclass(frozen=True)
class Budget:
    """When a trial gives up: after ``max_steps``, ``max_examples`` or ``max_seconds`` of training."""

    max_steps: int | None = 10_000
    max_examples: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_steps is None and self.max_examples is None and self.max_seconds is None:
            raise UsageError(
                "budget: give at least one of --max-steps, --max-examples, --max-seconds"
            )
        for name, value in (("--max-steps", self.max_steps), ("--max-examples", self.max_examples)):
            if value is not None and value < 1:
                raise UsageError(f"{name} must be >= 1 (got {value})")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise UsageError(f"--max-seconds must be > 0 (got {self.max_seconds})")

    def step_limit(self, batch_size: int) -> int | None:
        """The number of steps allowed by the step and example budgets (None: unbounded)."""
        limits = [self.max_steps] if self.max_steps is not None else []
        if self.max_examples is not None:
            limits.append(max(1, self.max_examples // batch_size))
        return min(limits) if limits else None


@dataclass(frozen=True)
class EvalCadence:
    """When to evaluate: at step 0, then every ``every`` steps or on a geometric grid.

    Example: ``EvalCadence.parse("geometric:1.25")`` evaluates at steps 0, 1, 2, 3, 4, 5, 7, 9,
    12, 15, 19, ... (each step at least ``ratio`` times the previous, and at least one more),
    so small step counts are resolved as finely as large ones relatively.
    """

    kind: str = "geometric"
    every: int = 25
    ratio: float = 1.05

    def __post_init__(self) -> None:
        if self.kind not in ("fixed", "geometric"):
            raise UsageError(f"--eval-every: unknown cadence {self.kind!r}; use N or geometric:R")
        if self.every < 1:
            raise UsageError(f"--eval-every must be >= 1 step (got {self.every})")
        if not (self.ratio > 1.0 and math.isfinite(self.ratio)):
            raise UsageError(f"--eval-every geometric ratio must be > 1 (got {self.ratio})")

    @classmethod
    def parse(cls, text: str | int, *, option: str = "--eval-every") -> EvalCadence:
        """``"25"`` (every 25 steps), ``"geometric"`` or ``"geometric:1.1"``."""
        raw = str(text).strip()
        kind, _, ratio = raw.partition(":")
        try:
            value = (float(ratio) if ratio else 1.05) if kind == "geometric" else int(raw)
        except ValueError:
            raise UsageError(
                f"{option}: cannot parse {raw!r}; use a step count (e.g. 25) or geometric:RATIO "
                "(e.g. geometric:1.1)"
            ) from None
        if kind == "geometric":
            return cls(kind="geometric", ratio=value)
        return cls(kind="fixed", every=int(value))

    def next_step(self, step: int) -> int:
        """The evaluation step after ``step``."""
        if self.kind == "fixed":
            return (step // self.every + 1) * self.every
        return max(step + 1, math.ceil(step * self.ratio))

    def __str__(self) -> str:
        return str(self.every) if self.kind == "fixed" else f"geometric:{self.ratio:g}"


@dataclass(frozen=True)
class TrialSpec:
    """One training run: workload, global batch size, optimizer, schedule, target, budget."""

    workload: str
    batch_size: int
    optimizer: OptimizerSpec
    target: Target
    model: str | None = None
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    budget: Budget = field(default_factory=Budget)
    cadence: EvalCadence = field(default_factory=EvalCadence)
    strategy: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or int(self.batch_size) != self.batch_size:
            raise UsageError(f"--batch-size must be an integer (got {self.batch_size!r})")
        if self.batch_size < 1:
            raise UsageError(f"--batch-size must be >= 1 (got {self.batch_size})")

    @property
    def learning_rate(self) -> float:
        return self.optimizer.learning_rate

    def to_params(self) -> dict[str, Any]:
        """A flat dict of every metaparameter, for logging (values are str/int/float)."""
        params: dict[str, Any] = {
            "workload": self.workload,
            "model": self.model or "default",
            "batch_size": self.batch_size,
            "strategy": self.strategy,
            "seed": self.seed,
            "target": str(self.target),
            "eval_cadence": str(self.cadence),
        }
        params.update(
            {
                f"optimizer.{k}" if k != "name" else "optimizer": v
                for k, v in asdict(self.optimizer).items()
            }
        )
        params.update(
            {
                f"schedule.{k}" if k != "name" else "schedule": v
                for k, v in asdict(self.schedule).items()
            }
        )
        params.update({f"budget.{k}": v for k, v in asdict(self.budget).items()})
        params.update({f"workload.{k}": v for k, v in self.workload_options.items()})
        return {k: v for k, v in params.items() if v is not None}


def _positive(option: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UsageError(f"{option} must be > 0 (got {value})")


def _in_unit(option: str, value: float, *, upper_open: bool) -> None:
    ok = 0.0 <= value < 1.0 if upper_open else 0.0 <= value <= 1.0
    if not ok:
        interval = "[0, 1)" if upper_open else "[0, 1]"
        raise UsageError(f"{option} must be in {interval} (got {value})")
