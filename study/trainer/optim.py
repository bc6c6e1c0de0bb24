"""Optimizers and learning-rate schedules built from their specs (inside a strategy scope)."""

from __future__ import annotations

import math

import keras
from keras import ops

from study.config.trial import Budget, OptimizerSpec, ScheduleSpec, default_of


@keras.saving.register_keras_serializable(package="study")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup over ``warmup_steps``, then constant, linear or cosine decay.

    Example: base 0.1, warmup 10, linear decay over 100 steps to end_factor 0: the rate is 0.01
    at the first step, 0.1 at step 9, 0.05 at step 60 and 0.0 from step 110 on.

    The base rate is a variable read inside the graph: `set_base` changes it for a reused
    optimizer without retracing the compiled training function that calls the schedule.
    """

    def __init__(
        self, base: float, kind: str, warmup_steps: int, decay_steps: int, end_factor: float
    ) -> None:
        self.base = float(base)
        self.base_rate = keras.Variable(
            self.base,
            dtype="float32",
            trainable=False,
            name="base_learning_rate",
            aggregation="only_first_replica",
        )
        self.kind = kind
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = max(1, int(decay_steps))
        self.end_factor = float(end_factor)

    def __call__(self, step):  # type: ignore[override]
        t = ops.cast(step, "float32")
        warm = float(max(1, self.warmup_steps))
        warmup_scale = ops.minimum((t + 1.0) / warm, 1.0) if self.warmup_steps else 1.0
        frac = ops.clip((t - self.warmup_steps) / float(self.decay_steps), 0.0, 1.0)
        if self.kind == "linear":
            decay = 1.0 - (1.0 - self.end_factor) * frac
        elif self.kind == "cosine":
            decay = self.end_factor + (1.0 - self.end_factor) * 0.5 * (
                1.0 + ops.cos(math.pi * frac)
            )
        else:
            decay = 1.0
        return self.base_rate * warmup_scale * decay

    def set_base(self, base: float) -> None:
        """Change the base rate (the traced schedule reads it on its next call)."""
        self.base = float(base)
        self.base_rate.assign(self.base)

    def get_config(self) -> dict:
        return {
            "base": self.base,
            "kind": self.kind,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_factor": self.end_factor,
        }


def resolved_schedule(
    schedule: ScheduleSpec, step_limit: int | None
) -> tuple[str, int, int, float] | None:
    """The schedule as the optimizer runs it: (kind, warmup steps, decay horizon, end factor),
    or None for a constant rate without warmup. Without ``decay_steps`` the decay lasts until
    the step budget runs out (`Budget`'s default steps without one).

    Example: linear, warmup 10, budget 110 steps -> ("linear", 10, 100, 0.0).
    """
    if schedule.name == "constant" and not schedule.warmup_steps:
        return None
    limit = step_limit or default_of(Budget, "max_steps")
    horizon = schedule.decay_steps or max(1, limit - schedule.warmup_steps)
    return (schedule.name, schedule.warmup_steps, horizon, schedule.end_factor)


def learning_rate(spec: OptimizerSpec, schedule: ScheduleSpec, step_limit: int | None):
    """A float for a constant rate without warmup, else a `WarmupDecay` schedule."""
    resolved = resolved_schedule(schedule, step_limit)
    if resolved is None:
        return spec.learning_rate
    return WarmupDecay(spec.learning_rate, *resolved)


def set_learning_rate(optimizer: keras.optimizers.Optimizer, rate: float) -> None:
    """Set the base learning rate of an optimizer built by `make_optimizer` (a variable, or a
    `WarmupDecay` schedule's base), without retracing anything that uses it."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
    schedule = getattr(inner, "_learning_rate", None)
    if isinstance(schedule, WarmupDecay):
        schedule.set_base(rate)
    else:
        inner.learning_rate = float(rate)


def make_optimizer(
    spec: OptimizerSpec,
    schedule: ScheduleSpec,
    step_limit: int | None,
    *,
    loss_scale: bool = False,
) -> keras.optimizers.Optimizer:
    """Build the Keras optimizer for a spec; call it inside ``strategy.scope()``.

    ``loss_scale`` wraps it in a `keras.optimizers.LossScaleOptimizer` (dynamic loss scaling,
    for mixed_float16): the training step scales the loss with ``optimizer.scale_loss``.
    """
    optimizer = _optimizer(spec, schedule, step_limit)
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scale else optimizer


def _optimizer(
    spec: OptimizerSpec, schedule: ScheduleSpec, step_limit: int | None
) -> keras.optimizers.Optimizer:
    lr = learning_rate(spec, schedule, step_limit)
    lr = lr if isinstance(lr, WarmupDecay) else float(lr)
    decay = spec.weight_decay or None
    if spec.name == "adam":
        return keras.optimizers.Adam(
            learning_rate=lr,
            beta_1=spec.beta1,
            beta_2=spec.beta2,
            epsilon=spec.epsilon,
            weight_decay=decay,
        )
    momentum = 0.0 if spec.name == "sgd" else spec.momentum
    return keras.optimizers.SGD(
        learning_rate=lr,
        momentum=momentum,
        nesterov=spec.name == "nesterov",
        weight_decay=decay,
    )
