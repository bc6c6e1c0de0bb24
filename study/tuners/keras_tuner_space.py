"""The search space as KerasTuner `HyperParameters` (the only place the space meets KerasTuner).

Example: ``learning_rate: {low: 1.0e-3, high: 1.0, scale: log}`` becomes
``hp.Float("learning_rate", 0.001, 1.0, sampling="log")``; ``warmup_steps: {low: 0, high: 500,
scale: linear}`` becomes ``hp.Int("warmup_steps", 0, 500, sampling="linear")``;
``{choices: [...]}``, ``batch_size`` and ``strategy`` become ``hp.Choice``.

``keras_tuner`` (and with it TensorFlow) is imported only when a translation is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from study.config.space import CategoricalParam, FloatParam, IntParam, Param, SearchSpace

if TYPE_CHECKING:  # pragma: no cover
    import keras_tuner

__all__ = ["add_hyperparameter", "to_hyperparameters"]


def to_hyperparameters(space: SearchSpace) -> keras_tuner.HyperParameters:
    """``HyperParameters`` with ``batch_size``, ``strategy`` (Choice), then the tuned parameters."""
    import keras_tuner

    hp = keras_tuner.HyperParameters()
    hp.Choice("batch_size", list(space.batch_sizes), ordered=True)
    hp.Choice("strategy", list(space.strategies), ordered=False)
    for param in space.params:
        add_hyperparameter(hp, param)
    return hp


def add_hyperparameter(hp: keras_tuner.HyperParameters, param: Param) -> None:
    """Register one parameter on ``hp``."""
    sampling = "log" if getattr(param, "log", False) else "linear"
    if isinstance(param, FloatParam):
        hp.Float(param.name, param.low, param.high, sampling=sampling)
    elif isinstance(param, IntParam):
        hp.Int(param.name, param.low, param.high, sampling=sampling)
    elif isinstance(param, CategoricalParam):
        ordered = all(isinstance(c, (int, float)) for c in param.choices)
        hp.Choice(param.name, list(param.choices), ordered=ordered)
    else:
        raise TypeError(f"unknown parameter type {type(param).__name__}")
