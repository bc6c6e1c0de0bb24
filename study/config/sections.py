"""The top-level sections of a study file, each read into its part of the data model.

`read_settings` reads the keys of the trial settings (`SETTING_KEYS`: budget, eval_every, seed,
loss, ...) into one `TrialSettings`; the others read ``target``, ``workload_options``,
``tuner``, ``heartbeat`` and ``allocation``. Each checks the YAML's types with the `Reader` and
leaves the rules of the values to the data model, whose `FieldError` is renamed to the file and
key. The search space is read by `study.config.space_reader`; `study.config.studyfile` loads
the file and puts the sections together.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from study.config.hold import DEFAULT_HOLD, Hold
from study.config.rules import FieldError
from study.config.study import (
    Allocation,
    AllocationMode,
    Confirmation,
    Heartbeat,
    Oracle,
    Sampler,
    TunerSettings,
    WarmStart,
)
from study.config.target import Target
from study.config.trial import JIT_COMPILE, PRECISIONS, Budget, EvalCadence, TrialSettings
from study.config.yaml_reader import Reader
from study.errors import UsageError
from study.extension import AllocationModeSpec, allocation_modes, needs, provider

__all__ = [
    "SETTING_KEYS",
    "allocation_mode",
    "read_allocation",
    "read_heartbeat",
    "read_hold",
    "read_settings",
    "read_target",
    "read_tuner",
    "read_workload_options",
]

#: The study file's keys of `TrialSettings`: its fields, ``eval_every`` for its ``cadence``.
SETTING_KEYS = tuple(
    "eval_every" if item.name == "cadence" else item.name for item in fields(TrialSettings)
)
BUDGET_KEYS = ("max_steps", "max_examples", "max_seconds")
TUNER_KEYS = (
    "sampler",
    "oracle",
    "pruning",
    "prune_slack",
    "max_consecutive_failures",
    "seed",
    "transfer",
    "design",
    "fit_ahead",
    "confirm",
    "warm_start",
)
CONFIRM_KEYS = ("top", "seeds")
WARM_START_KEYS = ("study", "storage")
HOLD_KEYS = ("fraction", "min_steps")
HEARTBEAT_KEYS = ("interval", "grace")
ALLOCATION_KEYS = ("mode", "rounds", "steps")


def read_settings(r: Reader, mapping: Mapping[str, Any]) -> TrialSettings:
    """The trial settings from the file's top-level keys; a key left out keeps its default
    (``budget`` is required; null keeps the default of ``noise_scale``, ``noise_every`` and
    ``exact_steps``)."""
    default = TrialSettings()
    with r.naming(lambda field: field):  # a rule only the record knows, by its key
        return TrialSettings(
            budget=_budget(r, mapping["budget"]),
            cadence=_cadence(r, mapping["eval_every"])
            if "eval_every" in mapping
            else default.cadence,
            seed=r.integer(mapping.get("seed", default.seed), "seed", rule=">= 0"),
            loss=_loss(r, mapping.get("loss")),
            precision=r.choice(
                mapping.get("precision", default.precision), "precision", PRECISIONS
            ),
            jit_compile=_jit_compile(r, mapping.get("jit_compile", default.jit_compile)),
            noise_scale=_flag(
                r, mapping.get("noise_scale"), "noise_scale", default=default.noise_scale
            ),
            noise_every=r.integer(
                _or(mapping.get("noise_every"), default.noise_every), "noise_every", rule=">= 1"
            ),
            exact_steps=_flag(
                r, mapping.get("exact_steps"), "exact_steps", default=default.exact_steps
            ),
        )


def read_target(r: Reader, value: Any, hold: Any = None) -> Target:
    """``target`` with its hold rule from ``target_hold`` (left out or null: `DEFAULT_HOLD`)."""
    text = r.string(value, "target")
    with r.naming("target"):
        target = Target.parse(text)
    return replace(target, hold=read_hold(r, hold))


def read_hold(r: Reader, value: Any) -> Hold:
    """``target_hold``: ``{fraction: 0.05, min_steps: 5}`` (either key may be left out),
    ``off`` or false (the first crossing counts), null or left out (`DEFAULT_HOLD`)."""
    if value is None:
        return DEFAULT_HOLD
    if value is False or value == "off":
        return Hold.OFF
    if not isinstance(value, Mapping):
        r.fail("target_hold", "must be {fraction: F, min_steps: N} or off", value)
    r.keys(value, "target_hold", HOLD_KEYS, ())
    fraction = r.number(_or(value.get("fraction"), DEFAULT_HOLD.fraction), "target_hold.fraction")
    steps = r.integer(
        _or(value.get("min_steps"), DEFAULT_HOLD.min_steps), "target_hold.min_steps", rule=">= 0"
    )
    with r.naming(lambda field: field):
        return Hold(fraction, steps)


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


def read_workload_options(r: Reader, value: Any) -> dict[str, Any]:
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
    rule = f"must be a step count >= 1 or 'geometric:RATIO' (e.g. 25 or '{EvalCadence()}')"
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


def read_tuner(r: Reader, value: Any) -> TunerSettings:
    if value is None:
        return TunerSettings()
    tuner = r.keys(value, "tuner", TUNER_KEYS, ())
    flags = {}
    for key, default in (
        ("pruning", True),
        ("transfer", True),
        ("design", True),
        ("fit_ahead", False),
    ):
        flags[key] = tuner.get(key, default)
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
        prune_slack=_prune_slack(r, tuner.get("prune_slack")),
        confirm=_confirm(r, tuner.get("confirm")),
        warm_start=_warm_start(r, tuner.get("warm_start")),
        **flags,
    )


def _prune_slack(r: Reader, value: Any) -> float | None:
    """``tuner.prune_slack``: a number >= 1 (None: the allocation's default)."""
    if value is None:
        return None
    slack = r.number(value, "tuner.prune_slack")
    if slack < 1:
        r.fail(
            "tuner.prune_slack",
            "must be >= 1 (1 stops a trial at its batch size's best steps)",
            value,
        )
    return float(slack)


def _confirm(r: Reader, value: Any) -> Confirmation:
    """``tuner.confirm``: ``{top: N, seeds: M}`` (both >= 1), or null / false for none."""
    if value is None or value is False:
        return Confirmation()
    confirm = r.keys(value, "tuner.confirm", CONFIRM_KEYS, CONFIRM_KEYS)
    return Confirmation(
        top=r.integer(confirm["top"], "tuner.confirm.top", rule=">= 1"),
        seeds=r.integer(confirm["seeds"], "tuner.confirm.seeds", rule=">= 1"),
    )


def _warm_start(r: Reader, value: Any) -> WarmStart | None:
    """``tuner.warm_start``: a finished study's name, or ``{study: NAME, storage: URL}``
    (storage optional: this study's own); null for none."""
    if value is None:
        return None
    if isinstance(value, str):
        value = {"study": value}
    warm = r.keys(value, "tuner.warm_start", WARM_START_KEYS, ("study",))
    storage = warm.get("storage")
    return WarmStart(
        study=r.string(warm["study"], "tuner.warm_start.study"),
        storage=None if storage is None else r.string(storage, "tuner.warm_start.storage"),
    )


def read_heartbeat(r: Reader, value: Any) -> Heartbeat:
    """``heartbeat``: ``{interval: S, grace: S}`` in seconds (either may be left out)."""
    if value is None:
        return Heartbeat()
    beat = r.keys(value, "heartbeat", HEARTBEAT_KEYS, ())
    seconds = {k: r.number(beat[k], f"heartbeat.{k}") for k in HEARTBEAT_KEYS if k in beat}
    try:
        return Heartbeat(**seconds)
    except UsageError as exc:
        raise UsageError(f"{r.source}: {exc}") from None


def read_allocation(r: Reader, value: Any) -> Allocation:
    """``allocation``: ``{mode: NAME, rounds: N, steps: S}`` (all optional but ``steps``, which
    a mode that spends training steps needs and only such a mode takes), or null. ``mode`` is
    ``even`` or a mode of a loaded extension (`allocation_mode`)."""
    if value is None:
        return Allocation()
    spec = r.keys(value, "allocation", ALLOCATION_KEYS, ())
    mode, extension = allocation_mode(r, spec.get("mode", AllocationMode.EVEN.value))
    rounds = r.integer(spec.get("rounds", 3), "allocation.rounds", rule=">= 1")
    steps = spec.get("steps")
    if extension is not None and extension.spends_steps:
        if steps is None:
            r.fail("allocation.steps", f"is required with mode {mode}: the study's training steps")
        steps = r.integer(steps, "allocation.steps", rule=">= 1")
    elif steps is not None:
        spending = " or ".join(n for n, m in allocation_modes().items() if m.spends_steps)
        where = f"mode {spending}" if spending else "a mode that spends training steps"
        r.fail("allocation.steps", f"applies to {where} only (mode is {mode})", steps)
    return Allocation(mode, rounds, steps)


def allocation_mode(r: Reader, value: Any) -> tuple[str, AllocationModeSpec | None]:
    """``allocation.mode``: ``even`` (no spec: the core's) or the name of a mode a loaded
    extension adds, with its spec.

    Raises:
        UsageError: ``FILE: allocation.mode 'steps' needs the extension 'allocation' (...)``
            for the mode of an extension that is not loaded; else naming the modes there are.
    """
    modes = allocation_modes()
    if isinstance(value, str) and value != AllocationMode.EVEN.value and value not in modes:
        owner = provider(lambda extension: extension.allocation_modes(), value)
        if owner is not None:
            r.fail("allocation.mode", needs(repr(value), owner))
    mode = r.choice(value, "allocation.mode", (AllocationMode.EVEN.value, *modes))
    return mode, modes.get(mode)


def _values(enum_cls: type[enum.Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum_cls)
