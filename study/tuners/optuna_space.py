"""The search space as Optuna distributions (the only place the space meets Optuna).

Example: ``learning_rate: {low: 1.0e-3, high: 1.0, scale: log}`` becomes
``FloatDistribution(0.001, 1.0, log=True)``; ``warmup_steps: {choices: [0, 100]}`` becomes
``CategoricalDistribution((0, 100))``; the stratum coordinates ``batch_size`` and ``strategy``
become categorical distributions over the listed values.
"""

from __future__ import annotations

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from study.config.space import CategoricalParam, FloatParam, IntParam, Param, SearchSpace

__all__ = ["to_optuna_distribution", "to_optuna_distributions"]


def to_optuna_distributions(space: SearchSpace) -> dict[str, BaseDistribution]:
    """Distributions keyed by name: ``batch_size``, ``strategy``, then the tuned parameters.

    Inside one stratum, pass the tuned ones (``learning_rate`` first) to ``trial.suggest_*`` or
    ``study.ask(fixed_distributions=...)``; ``batch_size`` and ``strategy`` are categorical over
    the stratum coordinates, so a study that samples strata too can use the same dict.
    """
    distributions: dict[str, BaseDistribution] = {
        "batch_size": CategoricalDistribution(space.batch_sizes),
        "strategy": CategoricalDistribution(space.strategies),
    }
    distributions.update({param.name: to_optuna_distribution(param) for param in space.params})
    return distributions


def to_optuna_distribution(param: Param) -> BaseDistribution:
    """One parameter as an Optuna distribution."""
    if isinstance(param, FloatParam):
        return FloatDistribution(param.low, param.high, log=param.log)
    if isinstance(param, IntParam):
        return IntDistribution(param.low, param.high, log=param.log)
    if isinstance(param, CategoricalParam):
        return CategoricalDistribution(param.choices)
    raise TypeError(f"unknown parameter type {type(param).__name__}")
