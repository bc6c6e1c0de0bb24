"""One trial outside a study, as its three faces take it: `TrialDefinition`.

``study train`` (and ``check-workload``, ``noise-scale``) takes it as flags, `study.train` as
keyword arguments, and a study file holds the same fields as keys; each field's default is read
from the settings records that use it (`OptimizerSpec`, `ScheduleSpec`, `TrialSettings`,
`Budget`, `EvalCadence`, `Hold`), so every default is written once. The flags are generated
from these fields (`study.commands.trial_flags`), `study.train`'s keywords are checked against
them, and ``tests/config/test_trial_faces.py`` fails when a field exists in one face and not in
the others. `TrialDefinition.spec` builds the trial's `TrialSpec`, every value checked, without
TensorFlow; the workload is resolved by the check it is given (config does not import the
workloads: `study.runner.single.check_workload`).

Example: ``TrialDefinition("tabular", batch_size=64, max_steps=500).spec(check_workload)``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, Protocol

from study.config.hold import DEFAULT_HOLD, Hold
from study.config.rules import FieldError
from study.config.schedule import BatchSchedule, load_schedule
from study.config.target import Target
from study.config.trial import (
    Budget,
    EvalCadence,
    OptimizerSpec,
    ScheduleSpec,
    TrialSettings,
    TrialSpec,
    default_of,
)
from study.errors import UsageError
from study.strategies import StrategySpec, check_batch_divisible

__all__ = ["TrialDefinition", "WorkloadCheck", "field_paths", "study_file_key"]

_OPTIMIZER = OptimizerSpec()
_SCHEDULE = ScheduleSpec()
_SETTINGS = TrialSettings()


class WorkloadCheck(Protocol):
    """The workload resolved with its options, model and loss (``validate``: its data checked
    too), and ``target`` (None: the workload's default) checked against its task; returns the
    model's name and the target. Raises `FieldError` on ``workload``, ``workload_options...``,
    ``model``, ``loss`` or ``target``."""

    def __call__(
        self,
        workload: str,
        options: Mapping[str, Any],
        *,
        model: str | None,
        loss: str | None,
        target: str | None,
    ) -> tuple[str, Target]: ...


def _field(default: Any, *paths: str, key: str | None) -> Any:
    """A field whose errors the records raise on ``paths`` (default: its own name) and whose
    study-file key is ``key``."""
    return field(default=default, metadata={"paths": paths, "key": key})


@dataclass(frozen=True)
class TrialDefinition:
    """Every field of one trial outside a study, with the default of ``study train``.

    A field left None takes the default of the record it sets: no limit of ``max_steps``,
    ``max_examples`` and ``max_seconds`` means `Budget`'s default step limit; ``noise_every``
    (only with ``noise_scale``) defaults to `TrialSettings`'; ``target`` to the workload's.
    ``batch_schedule`` grows the global batch by examples seen: a `BatchSchedule`, its
    study-file section as a mapping, a YAML file holding one, or inline stages such as
    ``"32,128@40960"`` trained at ``learning_rate`` at the first batch size, scaled as
    ``(B / B0) ** lr_alpha``, with ``warmup_steps`` and ``stage_warmup_steps``
    (`study.config.schedule`); ``batch_size`` is then the first stage's.
    """

    # the workload
    workload: str = _field("mnist1d", key="workload")
    model: str | None = _field(None, key="model")
    loss: str | None = _field(_SETTINGS.loss, key="loss")
    workload_options: Mapping[str, Any] = field(
        default_factory=dict, metadata={"paths": (), "key": "workload_options"}
    )
    # the optimizer and schedule
    batch_size: int = _field(128, key="search_space.batch_size")
    learning_rate: float = _field(
        _OPTIMIZER.learning_rate, "optimizer.learning_rate", key="search_space.learning_rate"
    )
    optimizer: str = _field(_OPTIMIZER.name, key="optimizer")
    momentum: float = _field(_OPTIMIZER.momentum, "optimizer.momentum", key="search_space.momentum")
    beta1: float = _field(_OPTIMIZER.beta1, "optimizer.beta1", key="search_space.beta1")
    beta2: float = _field(_OPTIMIZER.beta2, "optimizer.beta2", key="search_space.beta2")
    epsilon: float = _field(_OPTIMIZER.epsilon, "optimizer.epsilon", key="search_space.epsilon")
    weight_decay: float = _field(
        _OPTIMIZER.weight_decay, "optimizer.weight_decay", key="search_space.weight_decay"
    )
    schedule: str = _field(_SCHEDULE.name, key="schedule")
    warmup_steps: int = _field(
        _SCHEDULE.warmup_steps, "schedule.warmup_steps", key="search_space.warmup_steps"
    )
    decay_steps: int | None = _field(
        _SCHEDULE.decay_steps, "schedule.decay_steps", key="search_space.decay_steps"
    )
    end_factor: float = _field(
        _SCHEDULE.end_factor, "schedule.end_factor", key="search_space.end_factor"
    )
    # the target, budget and evaluation
    target: str | None = _field(None, key="target")
    max_steps: int | None = _field(None, "budget.max_steps", key="budget.max_steps")
    max_examples: int | None = _field(None, "budget.max_examples", key="budget.max_examples")
    max_seconds: float | None = _field(None, "budget.max_seconds", key="budget.max_seconds")
    eval_every: str | int = _field(
        str(_SETTINGS.cadence), "cadence", "cadence.every", "cadence.ratio", key="eval_every"
    )
    target_hold: str = _field(DEFAULT_HOLD.to_param(), key="target_hold")
    seed: int = _field(_SETTINGS.seed, key="seed")
    # distribution and precision
    strategy: str = _field(default_of(TrialSpec, "strategy"), key="search_space.strategy")
    precision: str = _field(_SETTINGS.precision, key="precision")
    jit_compile: str = _field(_SETTINGS.jit_compile, key="jit_compile")
    # a batch-size schedule
    batch_schedule: BatchSchedule | Mapping[str, Any] | str | os.PathLike[str] | None = field(
        default=None, metadata={"paths": (), "key": "batch_schedule"}
    )
    lr_alpha: float | None = _field(None, key="batch_schedule.lr_scaling.alpha")
    stage_warmup_steps: int | None = _field(None, key="batch_schedule.stage_warmup_steps")
    # measurements
    noise_scale: bool = _field(_SETTINGS.noise_scale, key="noise_scale")
    noise_every: int | None = _field(None, key="noise_every")
    exact_steps: bool = _field(_SETTINGS.exact_steps, key="exact_steps")

    def changed(self, **changes: Any) -> TrialDefinition:
        """The definition with ``changes``, each the name of a field.

        Raises:
            FieldError: on a name that is no field (``lerning_rate: not a field of a trial
                (did you mean learning_rate?)``).
        """
        names = [item.name for item in fields(self)]
        for name in changes:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f"did you mean {close[0]}?" if close else f"the fields: {', '.join(names)}"
                raise FieldError(name, detail=f"not a field of a trial ({hint})")
        return replace(self, **changes)

    def settings(self, called: Callable[[str], str] = str) -> TrialSettings:
        """The trial's `TrialSettings` (budget, cadence, seed, measurements, ...).

        Raises:
            FieldError: a value a record refuses, on its field (``budget.max_steps``,
                ``cadence``), or ``noise_every`` without ``noise_scale`` (the message calls
                each field ``called(name)``, e.g. its flag).
        """
        limits = (self.max_steps, self.max_examples, self.max_seconds)
        budget = Budget() if all(limit is None for limit in limits) else Budget(*limits)
        if self.noise_every is not None and not self.noise_scale:
            every, scale = called("noise_every"), called("noise_scale")
            raise FieldError(
                "noise_every",
                detail=f"{self.noise_every} needs {scale} (it sets how often the noise scale is "
                f"measured); add {scale} or leave {every} out",
                sep=" ",
            )
        return TrialSettings(
            budget=budget,
            cadence=EvalCadence.parse(self.eval_every),
            seed=self.seed,
            loss=self.loss,
            precision=self.precision,
            jit_compile=self.jit_compile,
            noise_scale=bool(self.noise_scale),
            noise_every=_SETTINGS.noise_every if self.noise_every is None else self.noise_every,
            exact_steps=self.exact_steps,
        )

    def spec(self, check: WorkloadCheck, *, called: Callable[[str], str] = str) -> TrialSpec:
        """The trial's `TrialSpec`, every value checked (no TensorFlow): the workload resolved
        by ``check`` with its model, loss and target (default: the task's) with the hold rule,
        and the batch split over a strategy's fixed replicas (with ``batch_schedule``, every
        stage's batch, and the trial trains with it: `TrialSpec.with_batch_schedule`).

        Raises:
            FieldError: on the field (``batch_size``, ``optimizer.learning_rate``, ``target``,
                ``workload_options.path``, ``lr_alpha``, ``batch_schedule.stages``, ...), which
                each front end names its own way; a message that names a second field calls it
                ``called(name)``.
        """
        if not isinstance(self.workload, str) or not self.workload:
            raise FieldError("workload", "must be a non-empty string", self.workload)
        options = {} if self.workload_options is None else self.workload_options  # None: none
        if not isinstance(options, Mapping):
            raise FieldError(
                "workload_options", "must be a mapping of option names to values", options
            )
        options = dict(options)
        plan = self._batch_schedule(called)
        optimizer = OptimizerSpec(
            name=self.optimizer,
            learning_rate=self.learning_rate,
            momentum=self.momentum,
            beta1=self.beta1,
            beta2=self.beta2,
            epsilon=self.epsilon,
            weight_decay=self.weight_decay,
        )
        schedule = ScheduleSpec(
            name=self.schedule,
            warmup_steps=self.warmup_steps,
            decay_steps=self.decay_steps,
            end_factor=self.end_factor,
        )
        settings = self.settings(called)
        model, goal = check(
            self.workload, options, model=self.model, loss=settings.loss, target=self.target
        )
        parsed = StrategySpec.parse(self.strategy)
        spec = TrialSpec(
            workload=self.workload,
            workload_options=options,
            model=model,
            batch_size=plan.first_batch_size if plan is not None else self.batch_size,
            optimizer=optimizer,
            schedule=schedule,
            target=replace(goal, hold=Hold.parse(self.target_hold)),
            strategy=str(parsed),
            settings=settings,
        )
        if plan is not None and parsed.static_replicas:
            try:
                plan.check_replicas(parsed.static_replicas, spec.strategy)
            except FieldError as err:
                raise err.within("batch_schedule") from None
        if parsed.static_replicas:
            check_batch_divisible(spec.batch_size, parsed.static_replicas, strategy=spec.strategy)
        return spec if plan is None else spec.with_batch_schedule(plan)

    def _batch_schedule(self, called: Callable[[str], str]) -> BatchSchedule | None:
        """``batch_schedule`` (with ``learning_rate``, ``lr_alpha``, ``warmup_steps`` and
        ``stage_warmup_steps`` for inline stages) as a `BatchSchedule`, or None; its errors
        on this record's fields (``lr_alpha``) or ``batch_schedule.KEY``."""
        if self.batch_schedule is None:
            for name, does in (("lr_alpha", "scales its learning rate"),
                               ("stage_warmup_steps", "ramps its stages' rates")):  # fmt: skip
                if getattr(self, name) is not None:
                    raise UsageError(f"{called(name)} needs {called('batch_schedule')} (it {does})")
            return None
        try:
            return load_schedule(
                self.batch_schedule,
                learning_rate=self.learning_rate,
                alpha=self.lr_alpha,
                warmup_steps=self.warmup_steps,
                stage_warmup_steps=self.stage_warmup_steps or 0,
            )
        except FieldError as err:
            if err.field in ("learning_rate", "warmup_steps", "stage_warmup_steps"):
                raise
            if err.field == "lr_scaling.alpha":
                raise FieldError(
                    "lr_alpha", err.rule, err.value, detail=err.detail, sep=err.sep, got=err.got
                ) from None
            raise err.within("batch_schedule") from None


def field_paths(item: Field[Any]) -> tuple[str, ...]:
    """The data-model fields a `TrialDefinition` field sets, as errors name them
    (``learning_rate``: ``optimizer.learning_rate``; ``eval_every``: ``cadence``, ...)."""
    return item.metadata["paths"] or (item.name,)


def study_file_key(item: Field[Any]) -> str | None:
    """The study-file key of a `TrialDefinition` field (``search_space.momentum``)."""
    return item.metadata["key"]
