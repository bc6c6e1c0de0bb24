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
    target_hold: {fraction: 0.05, min_steps: 5}  # optional (these defaults); steps to target is
                                       #   the first step from which the target holds through
                                       #   the next max(min_steps, fraction x step) steps;
                                       #   off: the first evaluation that meets it
    budget:                            # required; at least one limit, the others null/omitted
      max_steps: 5000
      max_examples: null
      max_seconds: null
    eval_every: "geometric:1.05"       # optional; an int N (every N steps) or geometric[:RATIO]
    optimizer: nesterov                # optional; sgd | momentum | nesterov | adam
    schedule: constant                 # optional; constant | linear | cosine
    seed: 0                            # optional; default 0: the base of the trials' seeds
    training_seeds: per_trial          # optional; per_trial (default: each trial's training
                                       #   seed drawn from seed and its number) or pinned
                                       #   (every trial trains under seed itself)
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
      prune_slack: 1.5                 # >= 1: a trial stops after this many times its batch
                                       #   size's best steps so far (default 1.5; 1 with a
                                       #   budget of training steps: allocation.steps)
      max_consecutive_failures: 5      # default 5; >= 1
      seed: null                       # optional; seeds the samplers and oracles (default: seed)
      transfer: true                   # default true; centre each batch size's learning-rate
                                       #   search on what the other batch sizes found
      design: true                     # default true; 2 trials in 4 from a stratum's 3rd first
                                       #   bracket its best rate, then go where they narrow
                                       #   B_noise and the recommendation
      confirm: {top: 2, seeds: 2}      # optional; re-run each stratum's 2 best points under 2
                                       #   other seeds (+top*seeds trials per stratum; default off)
      warm_start: d4000                # optional; each batch size's first trial at the best
                                       #   rate this finished study found there (or
                                       #   {study: NAME, storage: URL}; default none)
    heartbeat: {interval: 10, grace: 60}   # optional; seconds: running trials are stamped every
                                       #   interval; a stamp older than grace (>= 2 x interval)
                                       #   means its host died: the trial is interrupted, rerun
    allocation: {mode: even}           # optional; even (default) or {mode: adaptive, rounds: 3}:
                                       #   the grid around a pilot's B_simple, trials in rounds
                                       #   to the strata where the fit is least certain; or
                                       #   {mode: steps, steps: 20000}: half the trials each,
                                       #   then each where the answer narrows most per step,
                                       #   within 20000 training steps
    storage_retry: 300                 # optional; seconds a database storage that stops
                                       #   answering is waited for before exit status 75
                                       #   (default: --storage-retry, $STUDY_STORAGE_RETRY, 300)
    overhead: 0.2                      # optional; the critical batch size is where steps run
                                       #   this share above perfect scaling (report --overhead)
    batch_schedule:                    # optional; schedule trials besides the search: the
      learning_rate: 0.01              #   global batch grows by examples seen, the rate at the
      lr_scaling: {alpha: 0.5}         #   first stage's batch scaled as (B / B0) ** alpha;
      stages:                          #   seeds trials, compared in the report with the best
        - {from_examples: 0, batch_size: 32}       # fixed batch size (study.config.schedule)
        - {from_examples: 40960, batch_size: 128}
      seeds: 3                         #   default 3; strategy: default the first strategy
    branch: {batch_size: 16, examples: 40000, window: 4096}   # optional; `study branch FILE`:
                                       #   CBS(t) from checkpoints of a reference run at B0
                                       #   (study.ext.branch.section has every key)

Further metaparameters are the ones `TrialSpec` understands: ``momentum``, ``beta1``, ``beta2``,
``epsilon``, ``weight_decay``, ``end_factor`` (floats), ``warmup_steps``, ``decay_steps``
(integers: integer bounds and choices) and ``schedule``, ``optimizer`` (``choices`` only; they
override the fixed ``schedule`` / ``optimizer``). To hold one fixed, give a single choice, e.g.
``momentum: {choices: [0.9]}``. The learning rate is always a range (it is what each stratum
tunes); with ``tuner.sampler: grid`` the backend splits each range into grid points.
Every batch size must be divisible by N for each ``mirrored:N`` strategy.

Numbers: YAML 1.1 reads ``1e-3`` as text; write ``1.0e-3``. Unknown keys anywhere are errors,
and every error is one `UsageError` line naming the file, the key, the rule and the value.

This module loads the file and puts it together; each section is read by
`study.config.sections` (the trial settings, target, tuner, heartbeat, allocation) or
`study.config.space_reader` (the search space). They check the YAML's shape and types, then
build the data model (`study.config.study`, `study.config.space`, `study.config.trial`), which
checks the values with the rules in `study.config.rules`; strategy names and the evaluation
cadence are read by `StrategySpec.parse` and `EvalCadence.parse`, as on the command line. Each
`FieldError` is renamed to the file and key (``FILE: budget.max_steps must be >= 1 (got 0)``).
`load_study_file` also takes a check of the workload and model (the commands pass the workload
resolver, `study.workloads.resolve.check_study`: config sits below the workloads and does not
import them), so a typo fails at load, not in every trial.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from study.config.rules import FieldError
from study.config.sections import (
    SETTING_KEYS,
    read_allocation,
    read_heartbeat,
    read_settings,
    read_target,
    read_tuner,
    read_workload_options,
)
from study.config.space_reader import read_search_space
from study.config.study import DEFAULT_OVERHEAD, StudyConfig, TrainingSeeds
from study.config.trial import OPTIMIZERS, SCHEDULES, default_of
from study.config.yaml_reader import Reader, kind, load_yaml_file
from study.errors import UsageError
from study.extension import declaring, needs, study_sections
from study.paths import STUDY_NAME, STUDY_NAME_RULE, is_file

__all__ = ["SCHEMA_PATH", "load_study_file", "parse_study", "study_keys"]

SCHEMA_PATH = Path(__file__).with_name("study.schema.json")
"""JSON Schema (draft 2020-12) of the format, for editors; the loader checks a few rules more."""

TOP_LEVEL_KEYS = (
    "name",
    "workload",
    "workload_options",
    "model",
    "target",
    "target_hold",
    *SETTING_KEYS[:2],  # budget, eval_every
    "optimizer",
    "schedule",
    *SETTING_KEYS[2:],  # seed, loss, precision, ...
    "trials_per_stratum",
    "search_space",
    "tuner",
    "heartbeat",
    "allocation",
    "training_seeds",
    "storage_retry",
    "overhead",
)


def study_keys() -> tuple[str, ...]:
    """Every top-level key a study file may have here: the core's (`TOP_LEVEL_KEYS`) and the
    loaded extensions' (`study.extension.Section`: ``branch``, ...)."""
    return (*TOP_LEVEL_KEYS, *(section.key for section in study_sections()))


REQUIRED_KEYS = ("name", "workload", "target", "budget", "trials_per_stratum", "search_space")
_WORKLOAD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")


# --------------------------------------------------------------------------------------------
# Loading


def load_study_file(
    path: str | Path, *, check: Callable[[StudyConfig], None] | None = None
) -> StudyConfig:
    """Read and validate a study file; ``check`` (the commands pass
    `study.workloads.resolve.check_study`) then resolves its workload, model, loss and target,
    and each `FieldError` it raises is named by file and key (`in_file`).

    Raises:
        UsageError: the file is missing, is not valid YAML (the message gives the line), breaks
            a rule of the format (the message gives the key path and the value), or (``check``)
            names a workload, workload option, model or loss that does not exist or does not fit.
    """
    source = str(path)
    file = Path(path)
    if not is_file(file):
        raise UsageError(
            f"study file {source!r} not found; give the path of a YAML study file "
            "(`study init NAME` writes one; `study run --example quickstart` runs a shipped one)"
        )
    mapping, text = load_yaml_file(file, source)
    config = parse_study(mapping, source, text=text)
    if check is not None:
        try:
            check(config)
        except UsageError as exc:
            raise in_file(exc, source) from None
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
    sections = study_sections()  # the loaded extensions' keys (`study.extension.Section`)
    known = study_keys()
    _needs_extension(r, mapping, known)
    r.keys(mapping, "", known, REQUIRED_KEYS)
    raw = copy.deepcopy(dict(mapping))
    config = StudyConfig(  # keyword arguments are checked in file order
        name=r.string(mapping["name"], "name", pattern=STUDY_NAME, rule=STUDY_NAME_RULE),
        workload=r.string(
            mapping["workload"],
            "workload",
            pattern=_WORKLOAD,
            rule="a workload name (e.g. mnist1d) or module:callable",
        ),
        workload_options=read_workload_options(r, mapping.get("workload_options")),
        model=None if mapping.get("model") is None else r.string(mapping["model"], "model"),
        target=read_target(r, mapping["target"], mapping.get("target_hold")),
        settings=read_settings(r, mapping),
        optimizer=r.choice(
            mapping.get("optimizer", default_of(StudyConfig, "optimizer")), "optimizer", OPTIMIZERS
        ),
        schedule=r.choice(
            mapping.get("schedule", default_of(StudyConfig, "schedule")), "schedule", SCHEDULES
        ),
        trials_per_stratum=r.integer(
            mapping["trials_per_stratum"], "trials_per_stratum", rule=">= 1"
        ),
        space=read_search_space(r, mapping["search_space"]),
        tuner=read_tuner(r, mapping.get("tuner")),
        heartbeat=read_heartbeat(r, mapping.get("heartbeat")),
        allocation=read_allocation(r, mapping.get("allocation")),
        training_seeds=TrainingSeeds(
            r.choice(
                _or_default(mapping.get("training_seeds"), TrainingSeeds.PER_TRIAL.value),
                "training_seeds",
                tuple(m.value for m in TrainingSeeds),
            )
        ),
        storage_retry=_seconds(r, mapping.get("storage_retry"), "storage_retry"),
        overhead=_overhead(r, mapping.get("overhead")),
        source=source,
        text=yaml.safe_dump(raw, sort_keys=False) if text is None else text,
        raw=raw,
    )
    read = {
        s.key: s.read(r, mapping[s.key], config) for s in sections if mapping.get(s.key) is not None
    }
    return replace(config, sections=read) if read else config


def _needs_extension(r: Reader, mapping: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """The file's first unknown key, when an extension that is not loaded reads it: one line
    naming the extension (any other unknown key `Reader.keys` names)."""
    key = next((k for k in mapping if k not in known), None)
    owner = declaring(section=key) if isinstance(key, str) else None
    if owner is not None:
        raise UsageError(f"{r.source}: {needs(f'key {key!r}', owner)}")


def _overhead(r: Reader, value: Any) -> float:
    """``overhead``: the critical batch size's share above perfect scaling, in (0, 10]."""
    if value is None:
        return DEFAULT_OVERHEAD
    number = float(r.number(value, "overhead"))
    if not 0.0 < number <= 10.0:
        r.fail(
            "overhead", "must be in (0, 10], e.g. 0.2 for steps 20% above perfect scaling", value
        )
    return number


def _seconds(r: Reader, value: Any, path: str) -> float | None:
    """A number of seconds >= 0, or None when left out."""
    if value is None:
        return None
    seconds = r.number(value, path)
    if seconds < 0:
        r.fail(path, "must be a number of seconds >= 0", value)
    return float(seconds)


def _or_default(value: Any, default: Any) -> Any:
    return default if value is None else value


def in_file(exc: UsageError, source: str) -> UsageError:
    """A check's error in the study file's words: a `FieldError` on a field is named by file and
    key (fields are keys: ``FILE: workload_options.path: cannot read 'x.csv': ...``), an option
    the workload does not take reads ``FILE: workload_options: workload 'csv' takes no ...``."""
    if isinstance(exc, FieldError) and exc.field != "workload_options":
        return exc.named(f"{source}: {exc.field}")
    return UsageError(f"{source}: workload_options: {exc}")
