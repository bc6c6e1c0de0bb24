"""`study noise-scale`: a pilot run that measures the gradient noise scale and suggests a study.

One trial at a small batch size (the smallest of a study file's grid, or ``--batch-size``)
trains with ``noise_scale`` on, through the same worker pool and MLflow logging as ``study
train``. It prints B_simple (McCandlish et al. 2018) with its 95% interval over the evaluation
steps, the estimate where the target was met (or at the end), and a suggested study: a geometric
batch-size grid around B_simple wide enough for all three regimes, and a learning-rate range per
batch size (`study.analysis.pilot.suggest`, printed by `study.analysis.pilot_text`).
``--write FILE`` writes that study file (`study.config.writer`); ``--study NAME`` stores the
pilot in the study's ledger (``ledger.notes.set_pilot``), for its report. This module is the command's
flow only: flags and file into the pilot's trial, run, suggest, write, store, print.

Two forms: ``study noise-scale FILE`` (workload, model, options, target, optimizer from the
file) and ``study noise-scale --workload W --batch-size B --lr LR --target T`` (``study
train``'s flags, read by `study.commands.train.build_spec`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from study.analysis.pilot import Pilot, pilot_from_result, suggest
from study.analysis.pilot_text import format_suggestion, format_table, interval_text
from study.commands.flags import FLAGS
from study.commands.train import build_spec, run_tracked
from study.commands.trial_flags import TRIAL_FLAGS
from study.config.rules import FieldError
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import Budget, EvalCadence, TrialSpec
from study.errors import ExitCode, UsageError
from study.paths import study_name
from study.results import TrialResult, TrialState
from study.strategies import StrategySpec, check_batch_divisible

#: Trial flags a study file sets (by field of `TrialDefinition`, and the workload options'
#: own flags): given with a file, they are refused (the file decides).
FILE_SETS: tuple[str, ...] = (
    "workload", "model", "loss", "samples", "csv", "label", "text_column", "workload_options",
    "optimizer", "momentum", "beta1", "beta2", "epsilon", "weight_decay", "schedule",
    "warmup_steps", "decay_steps", "end_factor", "target", "target_hold",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the pilot runs and what it writes: the trial, the study it came from (if any)."""

    spec: TrialSpec
    config: StudyConfig | None
    strategies: tuple[str, ...]


def main(args: argparse.Namespace) -> int:
    given = _fill_defaults(args)
    plan = _plan(args, given)
    _check_outputs(args)
    from study.deps import require_tensorflow

    require_tensorflow()
    result, run_id, logger = _run_pilot(args, plan.spec)
    pilot = pilot_from_result(plan.spec, result)
    train_examples = _train_examples(plan.spec)
    replicas = int(result.environment.get("replicas") or 1)
    suggestion = (
        suggest(pilot, plan.strategies, train_examples, unit=_unit(plan.strategies, replicas))
        if _usable(pilot, result)
        else None
    )
    if logger is not None and run_id is not None:
        logger.client.log_dict(
            run_id, {"pilot": pilot.to_stored(), "suggestion": suggestion}, "pilot.json"
        )
        logger.log_trial(run_id, plan.spec, result, tags={"study.kind": "noise-scale pilot"})
    written = _write(args, plan, suggestion) if suggestion and args.write else None
    stored = _store(args, pilot, plan, written) if suggestion and args.study else None
    _print(args, plan.spec, result, pilot, suggestion, run_id, written, stored)
    if result.state is TrialState.FAILED:
        return ExitCode.FAILED
    return 0 if suggestion else 1


# -- the trial ---------------------------------------------------------------------------------
def _fill_defaults(args: argparse.Namespace) -> set[str]:
    """Set the trial flags left out to ``study train``'s defaults; return those given (an
    unset flag is absent, None or, for a switch, False)."""
    defaults = args.trial_defaults
    given = {
        name
        for name in defaults
        if getattr(args, name, None) is not None and getattr(args, name) is not False
    }
    for name, value in defaults.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return given


def _flag(name: str) -> str:
    face = TRIAL_FLAGS.get(name)
    return face.flag if face is not None else "--" + name.replace("_", "-")


def _plan(args: argparse.Namespace, given: set[str]) -> Plan:
    """The pilot's trial, from the study file or the flags (validated, no TensorFlow).

    Raises:
        UsageError: a bad flag or file, a flag the file sets, an odd batch size on one replica.
    """
    if args.file is None:
        args.noise_scale = True
        spec = build_spec(args)
        plan = Plan(spec, None, (spec.strategy,))
    else:
        refused = sorted(name for name in given if name in FILE_SETS)
        if refused:
            raise UsageError(
                f"{_flag(refused[0])}: the study file {args.file} sets it; leave the flag out "
                "(or give no study file)"
            )
        plan = _plan_from_file(args, given)
    _check_pilot_batch(plan.spec)
    return plan


def _plan_from_file(args: argparse.Namespace, given: set[str]) -> Plan:
    from study.config.studyfile import load_study_file
    from study.workloads.resolve import check_study

    config = load_study_file(args.file, check=check_study)
    try:
        strategy = (
            str(StrategySpec.parse(args.strategy)) if "strategy" in given else None
        ) or config.space.strategies[0]
        batch = args.batch_size if "batch_size" in given else min(config.space.batch_sizes)
        rate_param = config.space.param("learning_rate")
        rate = (
            args.learning_rate
            if "learning_rate" in given
            else math.sqrt(rate_param.low * rate_param.high)
        )
        first = Stratum(min(config.space.batch_sizes), config.space.strategies[0])
        spec = config.trial_spec(first, {"learning_rate": 0.1})
        optimizer = dataclasses.replace(spec.optimizer, learning_rate=rate)
        changes: dict[str, Any] = {"noise_scale": True, "noise_every": args.noise_every}
        if given & {"max_steps", "max_examples", "max_seconds"}:
            changes["budget"] = Budget(args.max_steps, args.max_examples, args.max_seconds)
        if "eval_every" in given:
            changes["cadence"] = EvalCadence.parse(args.eval_every)
        for name in ("seed", "precision", "jit_compile"):
            if name in given:
                changes[name] = getattr(args, name)
        spec = dataclasses.replace(
            spec.with_settings(**changes), batch_size=batch, strategy=strategy, optimizer=optimizer
        )
        replicas = StrategySpec.parse(strategy).static_replicas
        if replicas:
            check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
    except FieldError as err:
        raise err.named(FLAGS.get(err.field, err.field)) from None
    strategies = (strategy,) if "strategy" in given else config.space.strategies
    return Plan(spec, config, strategies)


def _check_pilot_batch(spec: TrialSpec) -> None:
    replicas = StrategySpec.parse(spec.strategy).static_replicas
    if replicas in (None, 1) and spec.batch_size % 2:
        raise UsageError(
            f"--batch-size {spec.batch_size}: on one replica the noise scale splits each batch "
            "into two halves; use an even batch size"
        )


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse outputs that cannot be written, before the pilot trains."""
    if args.write is not None:
        path = Path(args.write)
        if path.exists():
            raise UsageError(f"--write: {args.write} exists; give a new file name")
        if not path.parent.is_dir():
            raise UsageError(f"--write: directory {str(path.parent)!r} does not exist")
    if args.study is None:
        if args.storage is not None:
            raise UsageError("--storage applies only with --study NAME (where to store the pilot)")
        return
    study_name(args.study, called="--study")
    from study.ledger import Ledger

    if Ledger.open(args.storage, args.study, create=False).record() is None and not args.write:
        raise UsageError(
            f"--study: no study named {args.study!r} in this storage; run it first, or give "
            "--write FILE to create it from the suggested study file"
        )


def _run_pilot(args: argparse.Namespace, spec: TrialSpec) -> tuple[TrialResult, str | None, Any]:
    """Run the pilot in a worker, MLflow-logged unless ``--no-track`` (as ``study train``)."""
    name = f"pilot-{spec.workload}-b{spec.batch_size}-lr{spec.learning_rate:.3g}"
    return run_tracked(args, spec, name)


def _train_examples(spec: TrialSpec) -> int:
    """The training set's size (a batch larger than it is no batch size to study)."""
    from study.workloads import get_workload

    data = get_workload(spec.workload, spec.workload_options).load()
    count = getattr(data, "train_examples", None)
    return int(count) if count is not None else int(data.y_train.shape[0])


# -- the result --------------------------------------------------------------------------------
def _usable(pilot: Pilot, result: TrialResult) -> bool:
    return pilot.measured and result.state in (TrialState.REACHED, TrialState.NOT_REACHED)


def _unit(strategies: tuple[str, ...], replicas: int) -> int:
    """What every suggested size is a multiple of: each strategy's replica count (``replicas``,
    the pilot's, for one not known before it runs: ``auto``, ``mirrored``, ...)."""
    unit = 1
    for name in strategies:
        unit = math.lcm(unit, StrategySpec.parse(name).static_replicas or replicas)
    return unit


def _write(args: argparse.Namespace, plan: Plan, suggestion: dict[str, Any]) -> StudyConfig:
    """Write the suggested study file (checked as `study run` reads it)."""
    from study.config.writer import study_mapping, write_study

    low, high = suggestion["learning_rate"]
    data = study_mapping(
        plan.config,
        plan.spec,
        batch_sizes=suggestion["batch_sizes"],
        learning_rate=(low, high),
        strategies=suggestion["strategies"],
        name=args.study,
    )
    return write_study(data, args.write)


def _store(args: argparse.Namespace, pilot: Pilot, plan: Plan, written: StudyConfig | None) -> str:
    """Store the pilot in the study's ledger; a new study is created from the written file."""
    from study.ledger import Ledger

    ledger = Ledger.open(args.storage, args.study)
    if ledger.record() is None:
        from study.runner.launch import RunOptions, open_study

        assert written is not None  # `_check_outputs` asks for --write
        ledger, _record = open_study(written, RunOptions(storage=args.storage))
        created = f"created study {args.study!r} from {args.write}; "
    else:
        created = ""
    ledger.notes.set_pilot(pilot)
    return f"{created}pilot stored in study {args.study!r}"


# -- output ------------------------------------------------------------------------------------
def _print(
    args: argparse.Namespace,
    spec: TrialSpec,
    result: TrialResult,
    pilot: Pilot,
    suggestion: dict[str, Any] | None,
    run_id: str | None,
    written: StudyConfig | None,
    stored: str | None,
) -> None:
    if args.json:
        out = {
            "status": result.state.value,
            "steps_to_target": result.steps_to_target,
            "pilot": pilot.to_stored(),
            "suggestion": suggestion,
            "written": args.write if written else None,
            "stored": stored,
            "mlflow_run_id": run_id,
        }
        print(json.dumps(out))
        return
    env = result.environment
    print(
        f"pilot: {spec.workload}/{spec.model} batch {spec.batch_size} lr {spec.learning_rate:.3g} "
        f"on {env.get('strategy', spec.strategy)} ({env.get('replicas', '?')} replica(s)): "
        f"{result.state.value} after {result.steps_run} steps"
    )
    print(format_table(pilot))
    where = "target met" if result.steps_to_target is not None else "end of the pilot"
    if not pilot.measured:
        print(
            f"no estimate of B_simple at step {pilot.at_step} ({where}): run longer (--max-steps)"
        )
    else:
        interval = interval_text(pilot.b_simple_low, pilot.b_simple_high)
        interval = "no interval yet: too few steps measured" if interval == "-" else interval
        print(
            f"B_simple = {pilot.b_simple:.3g} (95% interval {interval}) at step {pilot.at_step} "
            f"({where})"
        )
    if result.state is TrialState.DIVERGED:
        print("the pilot diverged: give a smaller --lr", file=sys.stderr)
    if result.error:
        print(f"error: {result.error.strip().splitlines()[-1]}", file=sys.stderr)
    if suggestion:
        print(format_suggestion(suggestion, pilot))
    if written:
        print(f"wrote {args.write}: run it with `study run {args.write}`")
    if stored:
        print(stored)
    if not suggestion and (args.write or args.study):
        print("no suggestion: nothing written or stored", file=sys.stderr)
    if run_id:
        print(f"MLflow run {run_id}")
