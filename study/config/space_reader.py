"""The ``search_space`` section of a study file, read into a `SearchSpace`.

Batch sizes (a list, or every power of two in ``{low, high}``), strategies (read by
`StrategySpec.parse`, as on the command line; every batch size divisible by each ``mirrored:N``)
and one param per further key (``{low, high, scale}`` or ``{choices}``); the params' own rules
are the data model's (`study.config.space`), named by file and key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from study.config.rules import FieldError
from study.config.space import (
    CHOICE_PARAMS,
    FLOAT_PARAMS,
    INT_PARAMS,
    CategoricalParam,
    FloatParam,
    IntParam,
    Param,
    SearchSpace,
)
from study.config.yaml_reader import Reader
from study.strategies import StrategySpec, check_batch_divisible

__all__ = ["SPACE_KEYS", "read_search_space"]

SPACE_KEYS = (
    "batch_size",
    "learning_rate",
    "strategy",
    *FLOAT_PARAMS,
    *INT_PARAMS,
    *CHOICE_PARAMS,
)


def read_search_space(r: Reader, value: Any) -> SearchSpace:
    space = r.keys(value, "search_space", SPACE_KEYS, ("batch_size", "learning_rate"))
    batch_sizes = _batch_sizes(r, space["batch_size"])
    strategies = _strategies(r, space.get("strategy", ["auto"]))
    _check_divisible(r, batch_sizes, strategies)
    params = [_param(r, name, spec) for name, spec in space.items() if name not in SPACE_KEYS[:3]]
    return SearchSpace(
        batch_sizes=batch_sizes,
        strategies=tuple(str(strategy) for strategy in strategies),  # canonical names
        params=(_param(r, "learning_rate", space["learning_rate"]), *params),
    )


def _batch_sizes(r: Reader, value: Any) -> tuple[int, ...]:
    path = "search_space.batch_size"
    if isinstance(value, Mapping):
        bounds = r.keys(value, path, ("low", "high"), ("low", "high"))
        low = r.integer(bounds["low"], f"{path}.low", rule=">= 1")
        high = r.integer(bounds["high"], f"{path}.high", rule=">= 1")
        powers = tuple(2**k for k in range(high.bit_length()) if low <= 2**k <= high)
        if not powers:
            r.fail(path, "contains no power of two between low and high", dict(bounds))
        return powers
    if not isinstance(value, list) or not value:
        r.fail(path, "must be a non-empty list of ints or {low: L, high: H} (powers of two)", value)
    sizes = [r.integer(v, f"{path}[{i}]", rule=">= 1") for i, v in enumerate(value)]
    _check_unique(r, path, sizes)
    return tuple(sorted(sizes))


def _strategies(r: Reader, value: Any) -> tuple[StrategySpec, ...]:
    path = "search_space.strategy"
    if not isinstance(value, list) or not value:
        r.fail(
            path, "must be a non-empty list of strategy names (e.g. [default, mirrored:2])", value
        )
    specs = [_strategy(r, v, f"{path}[{i}]") for i, v in enumerate(value)]
    _check_unique(r, path, [str(spec) for spec in specs])
    return tuple(specs)


def _strategy(r: Reader, name: Any, path: str) -> StrategySpec:
    try:
        return StrategySpec.parse(name)
    except FieldError as err:  # one message for every bad name, listing the good ones
        r.fail(path, err.rule, name)


def _check_divisible(
    r: Reader, batch_sizes: Sequence[int], strategies: Sequence[StrategySpec]
) -> None:
    for strategy in strategies:
        replicas = strategy.static_replicas
        for size in batch_sizes if replicas else ():
            try:
                check_batch_divisible(size, replicas, strategy=str(strategy))
            except FieldError as err:
                rule = f"{err.rule} in search_space.strategy; drop {size} or that strategy"
                r.fail("search_space.batch_size", rule, size)


def _param(r: Reader, name: str, value: Any) -> Param:
    path = f"search_space.{name}"
    if name == "learning_rate" and not (isinstance(value, Mapping) and "low" in value):
        r.fail(path, "must be {low: L, high: H, scale: log|linear} (a range to tune)", value)
    if isinstance(value, Mapping) and "choices" in value:
        spec = r.keys(value, path, ("choices",), ("choices",))
        return _categorical(r, name, spec["choices"])
    if name in CHOICE_PARAMS:
        r.fail(path, "must be {choices: [...]}", value)
    if not isinstance(value, Mapping):
        r.fail(path, "must be {low: L, high: H, scale: log|linear} or {choices: [...]}", value)
    spec = r.keys(value, path, ("low", "high", "scale"), ("low", "high"))
    scale = r.choice(spec.get("scale", "log"), f"{path}.scale", ("log", "linear"))
    param, read = (IntParam, r.integer) if name in INT_PARAMS else (FloatParam, r.number)
    low = read(spec["low"], f"{path}.low")
    high = read(spec["high"], f"{path}.high")
    with r.naming(_space_key):  # the param's own rules: intervals, low < high, log scale
        return param(name=name, low=low, high=high, log=scale == "log")


def _categorical(r: Reader, name: str, choices: Any) -> CategoricalParam:
    path = f"search_space.{name}.choices"
    if not isinstance(choices, list) or not choices:
        r.fail(path, "must be a non-empty list", choices)
    if name in INT_PARAMS:
        choices = [r.integer(c, f"{path}[{i}]") for i, c in enumerate(choices)]
    elif name in FLOAT_PARAMS:
        choices = [r.number(c, f"{path}[{i}]") for i, c in enumerate(choices)]
    with r.naming(_space_key):  # the param's own rules: known names, intervals
        param = CategoricalParam(name=name, choices=tuple(choices))
    _check_unique(r, path, param.choices)
    return param


def _space_key(field: str) -> str:
    """The file key of a search-space param's field: ``momentum.low`` is in ``search_space``."""
    return f"search_space.{field}"


def _check_unique(r: Reader, path: str, values: Sequence[Any]) -> None:
    seen: list[Any] = []
    for value in values:
        if value in seen:
            r.fail(path, "lists a value twice", value)
        seen.append(value)
