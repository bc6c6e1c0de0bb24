"""The search space of a study, backend-neutral: strata and the tuned metaparameters.

A *stratum* is one ``(batch size, strategy)`` cell of the study design; inside each stratum the
tuners search the learning rate and any further metaparameters. The translation into Optuna
distributions or KerasTuner ``HyperParameters`` happens only in ``study.tuners``.

Example: batch sizes ``(16, 64)`` and strategies ``("default", "mirrored:2")`` give the strata
``b16/default, b16/mirrored:2, b64/default, b64/mirrored:2``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from study.config.rules import RULES, FieldError, check
from study.config.trial import OPTIMIZER_RULES, OPTIMIZERS, SCHEDULE_RULES, SCHEDULES
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

_RULE_OF: dict[str, str] = {**OPTIMIZER_RULES, **SCHEDULE_RULES}

#: Further metaparameters a study may tune, with the interval each value must lie in (the rules
#: `OptimizerSpec` and `ScheduleSpec` check).
FLOAT_PARAMS: dict[str, str] = {
    name: _RULE_OF[name]
    for name in ("momentum", "beta1", "beta2", "epsilon", "weight_decay", "end_factor")
}
INT_PARAMS: dict[str, str] = {name: _RULE_OF[name] for name in ("warmup_steps", "decay_steps")}
CHOICE_PARAMS: dict[str, tuple[str, ...]] = {"schedule": SCHEDULES, "optimizer": OPTIMIZERS}


def rule_of(name: str) -> str:
    """The interval rule of a numeric metaparameter (``learning_rate``: ``> 0``)."""
    return _RULE_OF[name]


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
    """A number in ``[low, high]`` (both included), uniform or (``log=True``) log-uniform.

    Both bounds must obey the metaparameter's rule (`rule_of`), ``low < high``, and ``low > 0``
    on a log scale. Errors are `FieldError` on ``NAME.low`` / ``NAME.high``; the fixes they
    suggest are written in the study-file syntax, where search spaces come from.
    """

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self) -> None:
        if self.name in _RULE_OF:
            for key in ("low", "high"):
                check(f"{self.name}.{key}", getattr(self, key), _RULE_OF[self.name])
        if not self.low < self.high:
            got = f"low={self.low}, high={self.high}"
            raise FieldError(f"{self.name}.low", f"must be < high; {self._fix()}", got=got)
        if self.log and self.low <= 0:
            rule = "must be > 0 with scale log (use scale: linear to include 0)"
            raise FieldError(f"{self.name}.low", rule, self.low)

    def _fix(self) -> str:
        if self.low != self.high:
            return "swap them"
        if self.name == "learning_rate":
            return "give a range: the learning rate is what each stratum tunes"
        return f"to hold {self.name} fixed write {{choices: [{self.low}]}}"

    def contains(self, value: Any) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class FloatParam(RangeParam):
    """A float range, e.g. ``FloatParam("learning_rate", 1e-3, 1.0, log=True)`` (bounds: floats)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))


@dataclass(frozen=True)
class IntParam(RangeParam):
    """An integer range, e.g. ``IntParam("warmup_steps", 0, 500)``."""

    low: int
    high: int


@dataclass(frozen=True)
class CategoricalParam:
    """One of a fixed tuple of values (a single choice holds the parameter fixed).

    Choices obey the same rules as ranges: ``schedule`` and ``optimizer`` take known names,
    numeric metaparameters values within their interval (floats or ints as the metaparameter
    is). Example: ``CategoricalParam("weight_decay", (0, 1e-4)).choices == (0.0, 1e-4)``.
    """

    name: str
    choices: tuple[Any, ...]

    def __post_init__(self) -> None:
        if not self.choices:
            raise FieldError(f"{self.name}.choices", "must be a non-empty list", list(self.choices))
        names, rule = CHOICE_PARAMS.get(self.name), _RULE_OF.get(self.name)
        for i, choice in enumerate(self.choices):
            field = f"{self.name}.choices[{i}]"
            if names is not None and choice not in names:
                raise FieldError(field, f"must be one of {', '.join(names)}", choice)
            if rule is not None:
                check(field, choice, rule)
        cast = int if self.name in INT_PARAMS else float if rule is not None else None
        if cast is not None:
            object.__setattr__(self, "choices", tuple(cast(c) for c in self.choices))

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
