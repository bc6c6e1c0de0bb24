"""The search space as KerasTuner `HyperParameters` (the only place the space meets KerasTuner).

Example: ``learning_rate: {low: 1.0e-3, high: 1.0, scale: log}`` becomes
``hp.Float("learning_rate", 0.001, 1.0, sampling="log")``; ``warmup_steps: {low: 0, high: 500,
scale: linear}`` becomes ``hp.Int("warmup_steps", 0, 500, sampling="linear")``; ``{choices:
[...]}`` becomes ``hp.Choice``. With a learning-rate window (a stratum whose search was centred
by transfer), the learning rate's range is the window, as for Optuna.

``keras_tuner`` (and with it TensorFlow) is imported only when a translation is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from study.config.space import CategoricalParam, IntParam, Param, SearchSpace
from study.tuners.optuna_space import windowed

if TYPE_CHECKING:  # pragma: no cover
    import keras_tuner

__all__ = ["add_hyperparameter", "to_hyperparameters"]


def to_hyperparameters(
    space: SearchSpace, lr_window: tuple[float, float] | None = None
) -> keras_tuner.HyperParameters:
    """``HyperParameters`` of the tuned parameters (``learning_rate`` first)."""
    import keras_tuner

    hp = keras_tuner.HyperParameters()
    for param in windowed(space, lr_window):
        add_hyperparameter(hp, param)
    return hp


def add_hyperparameter(hp: keras_tuner.HyperParameters, param: Param) -> None:
    """Register one parameter on ``hp``."""
    if isinstance(param, CategoricalParam):
        ordered = all(isinstance(c, (int, float)) for c in param.choices)
        hp.Choice(param.name, list(param.choices), ordered=ordered)
        return
    sampling = "log" if param.log else "linear"
    if isinstance(param, IntParam):
        hp.Int(param.name, param.low, param.high, sampling=sampling)
    else:
        hp.Float(param.name, param.low, param.high, sampling=sampling)
