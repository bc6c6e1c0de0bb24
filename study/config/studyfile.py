"""Study files: one YAML file per study, validated once into frozen, typed objects.

A study searches jointly over batch size, distribution strategy and learning rate (plus any
further metaparameters). Each ``(batch_size, strategy)`` pair is a *stratum*; inside each stratum
the tuner runs ``trials_per_stratum`` trials, each minimising the steps needed to reach
``target``. A full example (``search_spaces/mnist1d_mlp.yaml`` is close to it)::

    name: mnist1d-mlp                  # required; letters, digits, '_', '.', '-'
    workload: mnist1d                  # required; a built-in name or module:callable
    workload_options: {samples: 10000} # optional; passed to the workload as keyword arguments
    model: mlp                         # optional; the workload's default model if omitted
    target: "val_accuracy>=0.6"        # required; METRIC OP NUMBER, OP one of < <= > >=
    budget:                            # required; at least one limit, the others null/omitted
      max_steps: 5000
      max_examples: null
      max_seconds: null
    eval_every: "geometric:1.05"       # optional; an int N (every N steps) or geometric[:RATIO]
    optimizer: nesterov                # optional; sgd | momentum | nesterov | adam
    schedule: constant                 # optional; constant | linear | cosine
    seed: 0                            # optional; default 0
    loss: null                         # optional; replaces the workload task's loss: mse, mae,
                                       #   huber, binary_crossentropy, ... or module:callable
    precision: auto                    # optional; auto | float32 | mixed_float16 | mixed_bfloat16
    jit_compile: auto                  # optional; auto | on | off (XLA for the training step)
    noise_scale: false                 # optional; every trial measures the gradient noise
                                       #   scale B_simple (logged as noise/* curves)
    noise_every: 16                    # optional; >= 1; with noise_scale, measure one step in N
    exact_steps: true                  # optional; replay to the exact step the target was met
                                       #   (false: the first evaluation step that met it)
    trials_per_stratum: 8              # required; >= 1
    search_space:                      # required
      batch_size: [8, 32, 128]         # required; ints >= 1, or {low: 8, high: 4096}:
                                       #   every power of two in [low, high]
      learning_rate: {low: 1.0e-3, high: 1.0, scale: log}   # required; low > 0, low < high,
                                       #   scale log (default) or linear
      strategy: [default, mirrored:2]  # optional; default [auto]; auto, default, one_device,
                                       #   mirrored, mirrored:N, multi_worker_mirrored, tpu
      momentum: {low: 0.8, high: 0.99, scale: linear}       # optional further metaparameters:
      warmup_steps: {choices: [0, 100]}                     #   {low, high, scale} or {choices}
    tuner:                             # optional
      sampler: tpe                     # Optuna: tpe | random | qmc | grid (default tpe)
      oracle: bayesian                 # KerasTuner: random | bayesian | hyperband (default bayesian)
      pruning: true                    # default true
      max_consecutive_failures: 5      # default 5; >= 1
      seed: null                       # optional; seeds the samplers and oracles (default: seed)
      transfer: true                   # default true; centre each batch size's learning-rate
                                       #   search on what the other batch sizes found
      confirm: {top: 2, seeds: 2}      # optional; re-run each stratum's 2 best points under 2
                                       #   other seeds (+top*seeds trials per stratum; default off)
    heartbeat: {interval: 10, grace: 60}   # optional; seconds: running trials are stamped every
                                       #   interval; a stamp older than grace (>= 2 x interval)
                                       #   means its host died: the trial is interrupted, rerun
    allocation: {mode: even}           # optional; even (default) or {mode: adaptive, rounds: 3}:
                                       #   the grid around a pilot's B_simple, trials in rounds
                                       #   to the strata where the fit is least certain

Further metaparameters are the ones `TrialSpec` understands: ``momentum``, ``beta1``, ``beta2``,
``epsilon``, ``weight_decay``, ``end_factor`` (floats), ``warmup_steps``, ``decay_steps``
(integers: integer bounds and choices) and ``schedule``, ``optimizer`` (``choices`` only; they
override the fixed ``schedule`` / ``optimizer``). To hold one fixed, give a single choice, e.g.
``momentum: {choices: [0.9]}``. The learning rate is always a range (it is what each stratum
tunes); with ``tuner.sampler: grid`` the backend splits each range into grid points.
Every batch size must be divisible by N for each ``mirrored:N`` strategy.

Numbers: YAML 1.1 reads ``1e-3`` as text; write ``1.0e-3``. Unknown keys anywhere are errors,
and every error is one `UsageError` line naming the file, the key, the rule and the value.

This module is the parser only: it checks the YAML's shape and types, then builds the data model
(`study.config.study`, `study.config.space`, `study.config.trial`), which checks the values with
the rules in `study.config.rules`; strategy names and the evaluation cadence are read by
`StrategySpec.parse` and `EvalCadence.parse`, as on the command line. The parser renames each
`FieldError` to the file and key (``FILE: budget.max_steps must be >= 1 (got 0)``).
`load_study_file` also resolves the workload and model, so a typo fails at load, not in every
trial.
"""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

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
from study.config.study import (
    Allocation,
    AllocationMode,
    Confirmation,
    Heartbeat,
    Oracle,
    Sampler,
    StudyConfig,
    TunerSettings,
)
from study.config.target import Target
from study.config.trial import (
    JIT_COMPILE,
    NOISE_EVERY,
    OPTIMIZERS,
    PRECISIONS,
    SCHEDULES,
    Budget,
    EvalCadence,
)
from study.config.yaml_reader import Reader, StrictLoader, kind, yaml_message
from study.errors import UsageError
from study.strategies import StrategySpec, check_batch_divisible

__all__ = ["SCHEMA_PATH", "load_study_file", "parse_study"]

SCHEMA_PATH = Path(__file__).with_name("study.schema.json")
"""JSON Schema (draft 2020-12) of the format, for editors; the loader checks a few rules more."""

TOP_LEVEL_KEYS = (
    "name",
    "workload",
    "workload_options",
    "model",
    "target",
    "budget",
    "eval_every",
    "optimizer",
    "schedule",
    "seed",
    "loss",
    "precision",
    "jit_compile",
    "noise_scale",
    "noise_every",
    "exact_steps",
    "trials_per_stratum",
    "search_space",
    "tuner",
    "heartbeat",
    "allocation",
)
REQUIRED_KEYS = ("name", "workload", "target", "budget", "trials_per_stratum", "search_space")
BUDGET_KEYS = ("max_steps", "max_examples", "max_seconds")
TUNER_KEYS = (
    "sampler",
    "oracle",
    "pruning",
    "max_consecutive_failures",
    "seed",
    "transfer",
    "confirm",
)
CONFIRM_KEYS = ("top", "seeds")
HEARTBEAT_KEYS = ("interval", "grace")
ALLOCATION_KEYS = ("mode", "rounds")

SPACE_KEYS = (
    "batch_size",
    "learning_rate",
    "strategy",
    *FLOAT_PARAMS,
    *INT_PARAMS,
    *CHOICE_PARAMS,
)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_WORKLOAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")


# --------------------------------------------------------------------------------------------
# Loading


def load_study_file(path: str | Path) -> StudyConfig:
    """Read and validate a study file, and resolve its workload and model.

    Raises:
        UsageError: the file is missing, is not valid YAML (the message gives the line), breaks
            a rule of the format (the message gives the key path and the value), or names a
            workload, workload option or model that does not exist.
    """
    source = str(path)
    file = Path(path)
    if not file.is_file():
        raise UsageError(
            f"study file {source!r} not found; give the path of a YAML study file "
            "(the shipped ones are in search_spaces/)"
        )
    text = file.read_text(encoding="utf-8")
    try:
        mapping = yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise UsageError(yaml_message(source, exc)) from None
    config = parse_study(mapping, source, text=text)
    _check_workload(config)
    return config


def parse_study(mapping: Any, source: str, *, text: str | None = None) -> StudyConfig:
    """Validate an already-parsed study mapping; ``source`` names it in error messages.

    The workload is not imported (a stored study can be read where its custom workload is not
    importable); `load_study_file` checks it.

    Raises:
        UsageError: as `load_study_file`, except for the workload and model.
    """
    r = Reader(source)
    if not isinstance(mapping, Mapping):
        r.fail(
            "",
            f"the top level must be a mapping of keys (name, workload, ...), got {kind(mapping)}",
        )
    r.keys(mapping, "", TOP_LEVEL_KEYS, REQUIRED_KEYS)
    raw = copy.deepcopy(dict(mapping))
    return StudyConfig(  # keyword arguments are checked in file order
        name=r.string(
            mapping["name"], "name", pattern=_NAME, rule="letters, digits, '_', '.' or '-'"
        ),
        workload=r.string(
            mapping["workload"],
            "workload",
            pattern=_WORKLOAD,
            rule="a workload name (e.g. mnist1d) or module:callable",
        ),
        workload_options=_workload_options(r, mapping.get("workload_options")),
        model=None if mapping.get("model") is None else r.string(mapping["model"], "model"),
        target=_target(r, mapping["target"]),
        budget=_budget(r, mapping["budget"]),
        cadence=_cadence(r, mapping.get("eval_every", "geometric:1.05")),
        optimizer=r.choice(mapping.get("optimizer", "nesterov"), "optimizer", OPTIMIZERS),
        schedule=r.choice(mapping.get("schedule", "constant"), "schedule", SCHEDULES),
        seed=r.integer(mapping.get("seed", 0), "seed", rule=">= 0"),
        loss=_loss(r, mapping.get("loss")),
        precision=r.choice(mapping.get("precision", "auto"), "precision", PRECISIONS),
        jit_compile=_jit_compile(r, mapping.get("jit_compile", "auto")),
        noise_scale=_flag(r, mapping.get("noise_scale"), "noise_scale", default=False),
        noise_every=r.integer(
            _or(mapping.get("noise_every"), NOISE_EVERY), "noise_every", rule=">= 1"
        ),
        exact_steps=_flag(r, mapping.get("exact_steps"), "exact_steps", default=True),
        trials_per_stratum=r.integer(
            mapping["trials_per_stratum"], "trials_per_stratum", rule=">= 1"
        ),
        space=_search_space(r, mapping["search_space"]),
        tuner=_tuner(r, mapping.get("tuner")),
        heartbeat=_heartbeat(r, mapping.get("heartbeat")),
        allocation=_allocation(r, mapping.get("allocation")),
        source=source,
        text=yaml.safe_dump(raw, sort_keys=False) if text is None else text,
        raw=raw,
    )


def _check_workload(config: StudyConfig) -> None:
    """Build the workload (no data is loaded) and look its model up, naming file and key."""
    from study.workloads import get_workload

    source = config.source
    try:
        workload = get_workload(config.workload, config.workload_options)
    except FieldError as err:
        raise err.named(f"{source}: workload") from None
    except UsageError as exc:  # the workload's own checks of its options
        raise UsageError(f"{source}: workload_options: {exc}") from None
    except Exception as exc:  # a custom workload's constructor failed
        raise UsageError(
            f"{source}: workload: building {config.workload!r} failed ({type(exc).__name__}: {exc})"
        ) from None
    if config.model is not None:
        try:
            workload.check_model(config.model)
        except UsageError as exc:
            raise UsageError(f"{source}: model: {str(exc).removeprefix('--model: ')}") from None
    try:
        task = workload.task if config.loss is None else workload.task.with_loss(config.loss)
        own_model = config.model is not None and ":" in config.model
        task.check_target(config.target, workload=workload.name, open_metrics=own_model)
    except FieldError as err:
        raise err.named(f"{source}: {err.field}") from None


# --------------------------------------------------------------------------------------------
# Sections


def _target(r: Reader, value: Any) -> Target:
    text = r.string(value, "target")
    with r.naming("target"):
        return Target.parse(text)


def _loss(r: Reader, value: Any) -> str | None:
    """A built-in loss name or ``module:callable``; suitability is checked with the workload."""
    if value is None:
        return None
    return r.string(value, "loss")


def _jit_compile(r: Reader, value: Any) -> str:
    """``auto``, ``on`` or ``off``; YAML booleans read as on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return r.choice(value, "jit_compile", JIT_COMPILE)


def _or(value: Any, default: Any) -> Any:
    """``value``, or ``default`` where the file leaves the key out or sets it to null."""
    return default if value is None else value


def _flag(r: Reader, value: Any, key: str, *, default: bool) -> bool:
    """A true/false setting; null (or left out) keeps ``default``."""
    if value is None:
        return default
    if not isinstance(value, bool):
        r.fail(key, "must be true or false", value)
    return value


def _workload_options(r: Reader, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    options = r.mapping(value, "workload_options")
    for key in options:
        if not isinstance(key, str) or not key.isidentifier():
            r.fail("workload_options", "keys must be option names (identifiers)", key)
    return copy.deepcopy(dict(options))


def _budget(r: Reader, value: Any) -> Budget:
    budget = r.keys(value, "budget", BUDGET_KEYS, ())
    limits: dict[str, Any] = dict.fromkeys(BUDGET_KEYS)
    for key in ("max_steps", "max_examples"):
        if budget.get(key) is not None:
            limits[key] = r.integer(budget[key], f"budget.{key}")
    if budget.get("max_seconds") is not None:
        limits["max_seconds"] = r.number(budget["max_seconds"], "budget.max_seconds")
    try:
        return Budget(**limits)
    except FieldError as err:
        if err.field == "budget":  # no limit at all: show the section as written
            r.fail("budget", f"{err.rule} (not null)", dict(budget))
        raise err.named(f"{r.source}: {err.field}") from None  # fields are keys: budget.max_steps


def _cadence(r: Reader, value: Any) -> EvalCadence:
    """``eval_every``, read by `EvalCadence.parse` (as ``--eval-every``), in the file's words."""
    rule = "must be a step count >= 1 or 'geometric:RATIO' (e.g. 25 or 'geometric:1.05')"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        r.fail("eval_every", rule, value)
    try:
        return EvalCadence.parse(value)
    except FieldError as err:
        if err.field == "cadence.every":
            rule = "must be >= 1"
        elif err.field == "cadence.ratio":
            rule = "geometric ratio must be a number > 1"
        r.fail("eval_every", rule, value)


def _tuner(r: Reader, value: Any) -> TunerSettings:
    if value is None:
        return TunerSettings()
    tuner = r.keys(value, "tuner", TUNER_KEYS, ())
    flags = {}
    for key in ("pruning", "transfer"):
        flags[key] = tuner.get(key, True)
        if not isinstance(flags[key], bool):
            r.fail(f"tuner.{key}", "must be true or false", flags[key])
    seed = tuner.get("seed")
    return TunerSettings(
        sampler=Sampler(r.choice(tuner.get("sampler", "tpe"), "tuner.sampler", _values(Sampler))),
        oracle=Oracle(r.choice(tuner.get("oracle", "bayesian"), "tuner.oracle", _values(Oracle))),
        max_consecutive_failures=r.integer(
            tuner.get("max_consecutive_failures", 5), "tuner.max_consecutive_failures", rule=">= 1"
        ),
        seed=None if seed is None else r.integer(seed, "tuner.seed", rule=">= 0"),
        confirm=_confirm(r, tuner.get("confirm")),
        **flags,
    )


def _confirm(r: Reader, value: Any) -> Confirmation:
    """``tuner.confirm``: ``{top: N, seeds: M}`` (both >= 1), or null / false for none."""
    if value is None or value is False:
        return Confirmation()
    confirm = r.keys(value, "tuner.confirm", CONFIRM_KEYS, CONFIRM_KEYS)
    return Confirmation(
        top=r.integer(confirm["top"], "tuner.confirm.top", rule=">= 1"),
        seeds=r.integer(confirm["seeds"], "tuner.confirm.seeds", rule=">= 1"),
    )


def _heartbeat(r: Reader, value: Any) -> Heartbeat:
    """``heartbeat``: ``{interval: S, grace: S}`` in seconds (either may be left out)."""
    if value is None:
        return Heartbeat()
    beat = r.keys(value, "heartbeat", HEARTBEAT_KEYS, ())
    seconds = {k: r.number(beat[k], f"heartbeat.{k}") for k in HEARTBEAT_KEYS if k in beat}
    try:
        return Heartbeat(**seconds)
    except UsageError as exc:
        raise UsageError(f"{r.source}: {exc}") from None


def _allocation(r: Reader, value: Any) -> Allocation:
    """``allocation``: ``{mode: even|adaptive, rounds: N}`` (both optional), or null."""
    if value is None:
        return Allocation()
    spec = r.keys(value, "allocation", ALLOCATION_KEYS, ())
    mode = r.choice(spec.get("mode", "even"), "allocation.mode", _values(AllocationMode))
    rounds = r.integer(spec.get("rounds", 3), "allocation.rounds", rule=">= 1")
    return Allocation(AllocationMode(mode), rounds)


def _search_space(r: Reader, value: Any) -> SearchSpace:
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


def _values(enum_cls: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum_cls)
