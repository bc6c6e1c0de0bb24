"""The search space as Optuna distributions (the only place the space meets Optuna).

Example: ``learning_rate: {low: 1.0e-3, high: 1.0, scale: log}`` becomes
``FloatDistribution(0.001, 1.0, log=True)``; ``warmup_steps: {choices: [0, 100]}`` becomes
``CategoricalDistribution((0, 100))``. With a learning-rate window (a stratum whose search was
centred by transfer), the learning rate's range is the window.
"""

from __future__ import annotations

import dataclasses

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from study.config.space import CategoricalParam, IntParam, Param, SearchSpace

__all__ = ["to_optuna_distribution", "to_optuna_distributions", "windowed"]


def windowed(space: SearchSpace, lr_window: tuple[float, float] | None) -> tuple[Param, ...]:
    """The tuned parameters, the learning rate's range replaced by ``lr_window`` if given.

    Example: learning rate [0.001, 3.0] with window (0.03, 3.0) gives [0.03, 3.0].
    """
    if lr_window is None:
        return space.params
    lr, *rest = space.params
    assert not isinstance(lr, CategoricalParam)
    return (dataclasses.replace(lr, low=lr_window[0], high=lr_window[1]), *rest)


def to_optuna_distributions(
    space: SearchSpace, lr_window: tuple[float, float] | None = None
) -> dict[str, BaseDistribution]:
    """The tuned parameters (``learning_rate`` first) as distributions keyed by name."""
    return {param.name: to_optuna_distribution(param) for param in windowed(space, lr_window)}


def to_optuna_distribution(param: Param) -> BaseDistribution:
    """One parameter as an Optuna distribution."""
    if isinstance(param, CategoricalParam):
        return CategoricalDistribution(param.choices)
    if isinstance(param, IntParam):
        return IntDistribution(param.low, param.high, log=param.log)
    return FloatDistribution(param.low, param.high, log=param.log)
