"""The search space of a study, backend-neutral: strata and the tuned metaparameters.

A *stratum* is one ``(batch size, strategy)`` cell of the study design; inside each stratum the
tuners search the learning rate and any further metaparameters. The translation into Optuna
distributions or KerasTuner ``HyperParameters`` happens only in ``study.tuners``.

Example: batch sizes ``(16, 64)`` and strategies ``("default", "mirrored:2")`` give the strata
``b16/default, b16/mirrored:2, b64/default, b64/mirrored:2``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from study.config.trial import OPTIMIZERS, SCHEDULES
from study.errors import UsageError

__all__ = [
    "CHOICE_PARAMS",
    "FLOAT_PARAMS",
    "INT_PARAMS",
    "RULES",
    "CategoricalParam",
    "FloatParam",
    "IntParam",
    "Param",
    "RangeParam",
    "SearchSpace",
    "Stratum",
    "rule_of",
]

#: Further metaparameters a study may tune, with the interval each value must lie in.
FLOAT_PARAMS: dict[str, str] = {
    "momentum": "[0, 1)",
    "beta1": "[0, 1)",
    "beta2": "[0, 1)",
    "epsilon": "> 0",
    "weight_decay": ">= 0",
    "end_factor": "[0, 1]",
}
INT_PARAMS: dict[str, str] = {"warmup_steps": ">= 0", "decay_steps": ">= 1"}
CHOICE_PARAMS: dict[str, tuple[str, ...]] = {"schedule": SCHEDULES, "optimizer": OPTIMIZERS}

#: The interval rules above, as predicates.
RULES: dict[str, Callable[[float], bool]] = {
    "> 0": lambda v: v > 0,
    ">= 0": lambda v: v >= 0,
    ">= 1": lambda v: v >= 1,
    "[0, 1)": lambda v: 0 <= v < 1,
    "[0, 1]": lambda v: 0 <= v <= 1,
}


def rule_of(name: str) -> str:
    """The interval rule of a numeric metaparameter (``learning_rate``: ``> 0``)."""
    if name == "learning_rate":
        return "> 0"
    return FLOAT_PARAMS.get(name) or INT_PARAMS[name]


_STRATUM = re.compile(r"^b([1-9][0-9]*)/(.+)$")


@dataclass(frozen=True, order=True)
class Stratum:
    """A ``(batch size, strategy)`` cell of the study design; ``str()`` gives ``b128/default``.

    Example: ``Stratum.parse("b128/mirrored:2") == Stratum(128, "mirrored:2")``.
    """

    batch_size: int
    strategy: str

    @classmethod
    def parse(cls, text: str) -> Stratum:
        """Read the ``b{batch}/{strategy}`` form back."""
        match = _STRATUM.match(text)
        if not match:
            raise ValueError(f"not a stratum: {text!r} (expected e.g. 'b128/default')")
        return cls(int(match.group(1)), match.group(2))

    def __str__(self) -> str:
        return f"b{self.batch_size}/{self.strategy}"


@dataclass(frozen=True)
class RangeParam:
    """A number in ``[low, high]`` (both included), uniform or (``log=True``) log-uniform."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise UsageError(
                f"parameter {self.name!r}: low must be < high (low={self.low}, high={self.high})"
            )
        if self.log and self.low <= 0:
            raise UsageError(f"parameter {self.name!r}: log scale needs low > 0 (got {self.low})")

    def contains(self, value: Any) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class FloatParam(RangeParam):
    """A float range, e.g. ``FloatParam("learning_rate", 1e-3, 1.0, log=True)``."""


@dataclass(frozen=True)
class IntParam(RangeParam):
    """An integer range, e.g. ``IntParam("warmup_steps", 0, 500)``."""

    low: int
    high: int


@dataclass(frozen=True)
class CategoricalParam:
    """One of a fixed tuple of values (a single choice holds the parameter fixed)."""

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise UsageError(f"parameter {self.name!r} needs at least one choice")

    def contains(self, value: Any) -> bool:
        return value in self.choices


Param = FloatParam | IntParam | CategoricalParam


@dataclass(frozen=True)
class SearchSpace:
    """Stratum coordinates plus the tuned parameters.

    ``batch_sizes`` are sorted ascending; ``params[0]`` is always ``learning_rate``.
    """

    batch_sizes: tuple[int, ...]
    strategies: tuple[str, ...]
    params: tuple[Param, ...]

    def __post_init__(self) -> None:
        if not self.batch_sizes or not self.strategies:
            raise UsageError("a search space needs at least one batch size and one strategy")
        if not self.params or self.params[0].name != "learning_rate":
            raise UsageError("the first parameter of a search space must be learning_rate")

    def strata(self) -> list[Stratum]:
        """Every stratum, batch size major."""
        return [Stratum(b, s) for b in self.batch_sizes for s in self.strategies]

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        """The parameter called ``name``; `UsageError` listing the known ones otherwise."""
        for p in self.params:
            if p.name == name:
                return p
        raise UsageError(
            f"unknown search-space parameter {name!r}; known: {', '.join(self.param_names)}"
        )
