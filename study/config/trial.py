"""The specification of one trial: everything the trainer needs, validated once.

A `TrialSpec` is the trial's workload, batch size, strategy, optimizer and schedule, plus the
`TrialSettings` every trial of its study shares (budget, cadence, seed, loss, precision, XLA,
measurements). It is plain data (picklable, JSON-friendly through `to_params`), so the runner
can hand it to a worker process and the tracker can log it without touching TensorFlow.

Bad values raise `FieldError` naming the field as `to_params` does (``optimizer.learning_rate``,
``budget.max_steps``, ``batch_size``); ``study train`` renames it to its flag and the study-file
parser to the file and key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from study.config.rules import FieldError, check
from study.config.schedule import BatchSchedule
from study.config.target import Target

OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam")
SCHEDULES = ("constant", "linear", "cosine")
#: A trial measuring the gradient noise scale measures one step in this many by default
#: (about 6% more time per step at batch 32 on the MNIST-1D MLP, where a step is mostly
#: per-op overhead; less at bigger batches). A pilot measures more often (`PILOT_NOISE_EVERY`).
NOISE_EVERY = 16
#: A pilot (``study noise-scale``, the adaptive allocation's) exists to measure: one step in two.
PILOT_NOISE_EVERY = 2

#: The interval each numeric metaparameter must lie in; search spaces tune them within the same.
OPTIMIZER_RULES: dict[str, str] = {
    "learning_rate": "> 0",
    "momentum": "[0, 1)",
    "beta1": "[0, 1)",
    "beta2": "[0, 1)",
    "epsilon": "> 0",
    "weight_decay": ">= 0",
}
SCHEDULE_RULES: dict[str, str] = {
    "warmup_steps": ">= 0",
    "decay_steps": ">= 1",
    "end_factor": "[0, 1]",
}


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimizer and its metaparameters.

    ``sgd`` is plain SGD (``momentum`` is ignored), ``momentum`` is heavy-ball SGD,
    ``nesterov`` is SGD with Nesterov momentum, ``adam`` uses ``beta1``, ``beta2``, ``epsilon``.
    """

    name: str = "nesterov"
    learning_rate: float = 0.05
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-7
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        _check_choice("optimizer", self.name, OPTIMIZERS)
        for name, rule in OPTIMIZER_RULES.items():
            check(f"optimizer.{name}", getattr(self, name), rule)


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
        _check_choice("schedule", self.name, SCHEDULES)
        rule = SCHEDULE_RULES
        check("schedule.warmup_steps", self.warmup_steps, rule["warmup_steps"], unit="steps")
        if self.decay_steps is not None:  # None: until the step budget runs out
            check("schedule.decay_steps", self.decay_steps, rule["decay_steps"])
        check("schedule.end_factor", self.end_factor, rule["end_factor"])


@dataclass(frozen=True)
class Budget:
    """When a trial gives up: after ``max_steps``, ``max_examples`` or ``max_seconds`` of training."""

    max_steps: int | None = 10_000
    max_examples: int | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        limits = asdict(self)
        if all(value is None for value in limits.values()):
            raise FieldError("budget", f"needs at least one of {', '.join(limits)}", limits)
        for name in ("max_steps", "max_examples"):
            if limits[name] is not None:
                check(f"budget.{name}", limits[name], ">= 1")
        if self.max_seconds is not None:  # inf: no time limit
            check("budget.max_seconds", self.max_seconds, "> 0", finite=False)

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
            raise FieldError(
                "cadence",
                "must be fixed or geometric",
                self.kind,
                detail=f"unknown cadence {self.kind!r}; use N or geometric:R",
            )
        check("cadence.every", self.every, ">= 1", unit="step")
        if not (self.ratio > 1.0 and math.isfinite(self.ratio)):
            raise FieldError("cadence.ratio", "geometric ratio must be > 1", self.ratio)

    @classmethod
    def parse(cls, text: str | int, *, option: str | None = None) -> EvalCadence:
        """``"25"`` (every 25 steps), ``"geometric"`` or ``"geometric:1.1"``.

        Raises:
            FieldError: ``cadence`` (the text does not parse), ``cadence.every`` or
                ``cadence.ratio`` (out of range); ``option``, if given, names the value.
        """
        try:
            return cls._parse(text)
        except FieldError as err:
            if option is None:
                raise
            raise err.named(option) from None

    @classmethod
    def _parse(cls, text: str | int) -> EvalCadence:
        raw = str(text).strip()
        kind, _, ratio = raw.partition(":")
        try:
            value = (float(ratio) if ratio else None) if kind == "geometric" else int(raw)
        except ValueError:
            raise FieldError(
                "cadence",
                "must be a step count or geometric:RATIO",
                text,
                detail=f"cannot parse {raw!r}; use a step count (e.g. 25) or geometric:RATIO "
                "(e.g. geometric:1.1)",
            ) from None
        if kind == "geometric":  # no ratio: the default's
            return cls(kind="geometric") if value is None else cls(kind="geometric", ratio=value)
        return cls(kind="fixed", every=int(value))  # type: ignore[arg-type]

    def next_step(self, step: int) -> int:
        """The evaluation step after ``step``."""
        if self.kind == "fixed":
            return (step // self.every + 1) * self.every
        return max(step + 1, math.ceil(step * self.ratio))

    def __str__(self) -> str:
        return str(self.every) if self.kind == "fixed" else f"geometric:{self.ratio:g}"


#: Numeric precision of a trial: ``auto`` is float32 on CPUs, mixed_float16 on GPUs and
#: mixed_bfloat16 on TPUs (mixed_float16 trains with dynamic loss scaling).
PRECISIONS: tuple[str, ...] = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
#: XLA compilation of the training step: ``auto`` is off on CPUs (slower here), on elsewhere.
JIT_COMPILE: tuple[str, ...] = ("auto", "on", "off")


@dataclass(frozen=True)
class TrialSettings:
    """How a trial trains and measures, the same for every trial of a study.

    One record, held by `StudyConfig` (built from the study file's keys of the same names,
    ``eval_every`` for ``cadence``) and by each `TrialSpec` it makes, and built from a
    `study.config.definition.TrialDefinition` by ``study train`` and `study.train`; its values
    and defaults are written here, once. A new setting is a field here and one of
    `TrialDefinition` (its flag and keyword follow; ``tests/config/test_trial_faces.py`` asks
    for its study-file key, read in `study.config.sections`, and its JSON Schema entry);
    logged params and the study's fingerprint follow it.

    Example: ``TrialSettings(budget=Budget(max_steps=500), noise_scale=True, noise_every=4)``
    trains for at most 500 steps and measures the noise scale on one step in four.
    """

    budget: Budget = field(default_factory=Budget)
    cadence: EvalCadence = field(default_factory=EvalCadence)
    seed: int = 0
    #: The workload task's loss replaced: a built-in loss name or ``module:callable``.
    loss: str | None = None
    precision: str = "auto"
    jit_compile: str = "auto"
    #: Measure the gradient noise scale B_simple during training (`study.trainer.noise`).
    noise_scale: bool = False
    #: With ``noise_scale``, measure on one step in this many (each measured step costs about
    #: one more forward and backward pass at small batch): fewer costs less, more is tighter.
    noise_every: int = NOISE_EVERY
    #: Replay the steps before the first evaluation that met the target, evaluating every step,
    #: so steps to target is exact rather than read off the evaluation cadence.
    exact_steps: bool = True

    def __post_init__(self) -> None:
        for name in ("seed", "noise_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value:
                raise FieldError(name, "must be an integer", value)
        check("seed", self.seed, ">= 0")
        check("noise_every", self.noise_every, ">= 1")
        _check_choice("precision", self.precision, PRECISIONS)
        _check_choice("jit_compile", self.jit_compile, JIT_COMPILE)
        for name in ("noise_scale", "exact_steps"):
            if not isinstance(getattr(self, name), bool):
                raise FieldError(name, "must be true or false", getattr(self, name))

    def to_params(self) -> dict[str, Any]:
        """The settings as logged params: each field by its name, but ``budget.max_steps`` (and
        the other limits), ``eval_cadence`` (its text) and ``noise_every`` only with
        ``noise_scale``."""
        params: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "budget":
                params.update({f"budget.{k}": v for k, v in asdict(value).items()})
            elif item.name == "cadence":
                params["eval_cadence"] = str(value)
            elif item.name != "noise_every" or self.noise_scale:
                params[item.name] = value
        return params


@dataclass(frozen=True)
class TrialSpec:
    """One training run: workload, global batch size, optimizer, schedule, target and the
    study's `TrialSettings` (budget, cadence, seed, measurements, ...)."""

    workload: str
    batch_size: int
    optimizer: OptimizerSpec
    target: Target
    model: str | None = None
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    strategy: str = "auto"
    settings: TrialSettings = field(default_factory=TrialSettings)
    #: A global batch that grows by examples seen (`with_batch_schedule`); None: fixed.
    batch_schedule: BatchSchedule | None = None

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or int(self.batch_size) != self.batch_size:
            raise FieldError("batch_size", "must be an integer", self.batch_size)
        check("batch_size", self.batch_size, ">= 1")
        plan = self.batch_schedule
        if plan is not None and self.batch_size != plan.first_batch_size:
            raise FieldError(
                "batch_size",
                f"must be the batch schedule's first batch size ({plan.first_batch_size})",
                self.batch_size,
            )

    def with_batch_schedule(self, schedule: BatchSchedule) -> TrialSpec:
        """The trial trained with ``schedule``: its batch size the first stage's, its learning
        rate the schedule's (scaled with the batch by the trainer), its warmup the schedule's.

        Example: ``spec.with_batch_schedule(BatchSchedule((Stage(0, 32), Stage(4096, 128)),
        0.05))`` trains at batch 32 and rate 0.05 for 128 steps, then at 128 and 0.1.
        """
        return replace(
            self,
            batch_size=schedule.first_batch_size,
            optimizer=replace(self.optimizer, learning_rate=schedule.learning_rate),
            schedule=replace(self.schedule, warmup_steps=schedule.warmup_steps),
            batch_schedule=schedule,
        )

    def step_limit(self) -> int | None:
        """The steps the budget allows at this trial's batch size (or batch schedule)."""
        budget = self.settings.budget
        if self.batch_schedule is None:
            return budget.step_limit(self.batch_size)
        return self.batch_schedule.step_limit(budget.max_steps, budget.max_examples)

    def examples_at(self, step: int) -> int:
        """The training examples seen after ``step`` optimizer steps."""
        if self.batch_schedule is None:
            return step * self.batch_size
        return self.batch_schedule.examples_after(step)

    @property
    def learning_rate(self) -> float:
        return self.optimizer.learning_rate

    def with_settings(self, **changes: Any) -> TrialSpec:
        """The same trial with some settings changed, e.g. ``with_settings(noise_scale=True)``."""
        return replace(self, settings=replace(self.settings, **changes))

    def to_params(self) -> dict[str, Any]:
        """A flat dict of every metaparameter, for logging (values are str/int/float)."""
        params: dict[str, Any] = {
            "workload": self.workload,
            "model": self.model or "default",
            "batch_size": self.batch_size,
            "strategy": self.strategy,
            "target": str(self.target),
            "target_hold": self.target.hold.to_param(),
            **self.settings.to_params(),
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
        params.update({f"workload.{k}": v for k, v in self.workload_options.items()})
        if self.batch_schedule is not None:
            params.update(self.batch_schedule.to_params())
        return {k: v for k, v in params.items() if v is not None}


def default_of(record: type, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``record``, where it is written once:
    ``default_of(OptimizerSpec, "name")`` is ``"nesterov"``."""
    item = {f.name: f for f in fields(record)}[name]
    return item.default_factory() if item.default is MISSING else item.default  # type: ignore[misc]


def _check_choice(field: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        listed = ", ".join(choices)
        raise FieldError(
            field,
            f"must be one of {listed}",
            value,
            detail=f"unknown {field} {value!r}; choose from {listed}",
        )
