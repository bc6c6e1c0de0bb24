"""`study noise-scale`: a pilot run that measures the gradient noise scale and suggests a study.

One trial at a small batch size (the smallest of a study file's grid, or ``--batch-size``)
trains with ``noise_scale`` on, through the same worker pool and MLflow logging as ``study
train``. It prints B_simple (McCandlish et al. 2018) with its 95% interval over the evaluation
steps, the estimate where the target was met (or at the end), and a suggested study: a geometric
batch-size grid around B_simple wide enough for all three regimes, and a learning-rate range per
batch size (`study.analysis.pilot`). ``--write FILE`` writes that study file; ``--study NAME``
stores the pilot in the study's ledger (`Ledger.set_pilot`), for its report.

Two forms: ``study noise-scale FILE`` (workload, model, options, target, optimizer from the
file) and ``study noise-scale --workload W --batch-size B --lr LR --target T`` (``study
train``'s flags, read by `study.commands.train.build_spec`).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from study.analysis.pilot import (
    ALPHAS,
    Pilot,
    learning_rate_ranges,
    pilot_from_result,
    study_range,
    suggest_batch_sizes,
)
from study.commands.train import FLAGS, build_spec, run_tracked
from study.config.rules import FieldError
from study.config.space import Stratum
from study.config.study import StudyConfig
from study.config.trial import Budget, EvalCadence, TrialSpec
from study.errors import UsageError
from study.results import TrialResult, TrialState
from study.strategies import StrategySpec, check_batch_divisible

#: Trial flags a study file sets: given with a file, they are refused (the file decides).
FILE_SETS: tuple[str, ...] = (
    "workload", "model", "loss", "samples", "csv", "label", "text_column", "workload_option",
    "optimizer", "momentum", "beta1", "beta2", "epsilon", "weight_decay", "schedule", "warmup",
    "decay_steps", "end_factor", "target",
)  # fmt: skip
#: Rows of the printed table (evaluations spread over the run; ``--json`` has them all).
TABLE_ROWS = 20
#: Trials per stratum of a suggested study written without a study file.
DEFAULT_TRIALS = 8
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


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
        suggest(pilot, plan.strategies, train_examples, replicas)
        if _usable(pilot, result)
        else None
    )
    if logger is not None and run_id is not None:
        logger.client.log_dict(
            run_id, {"pilot": pilot.to_dict(), "suggestion": suggestion}, "pilot.json"
        )
        logger.log_trial(run_id, plan.spec, result, tags={"study.kind": "noise-scale pilot"})
    written = _write(args, plan, suggestion) if suggestion and args.write else None
    stored = _store(args, pilot, plan, written) if suggestion and args.study else None
    _print(args, plan.spec, result, pilot, suggestion, run_id, written, stored)
    if result.state is TrialState.FAILED:
        return 1
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
    return "--" + name.replace("_", "-")


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

    config = load_study_file(args.file)
    try:
        strategy = (
            str(StrategySpec.parse(args.strategy)) if "strategy" in given else None
        ) or config.space.strategies[0]
        batch = args.batch_size if "batch_size" in given else min(config.space.batch_sizes)
        rate_param = config.space.param("learning_rate")
        rate = args.lr if "lr" in given else math.sqrt(rate_param.low * rate_param.high)
        first = Stratum(min(config.space.batch_sizes), config.space.strategies[0])
        spec = config.trial_spec(first, {"learning_rate": 0.1})
        optimizer = dataclasses.replace(spec.optimizer, learning_rate=rate)
        changes: dict[str, Any] = {
            "batch_size": batch,
            "strategy": strategy,
            "optimizer": optimizer,
            "noise_scale": True,
            "noise_every": args.noise_every,
        }
        if given & {"max_steps", "max_examples", "max_seconds"}:
            changes["budget"] = Budget(args.max_steps, args.max_examples, args.max_seconds)
        if "eval_every" in given:
            changes["cadence"] = EvalCadence.parse(args.eval_every)
        for name in ("seed", "precision", "jit_compile"):
            if name in given:
                changes[name] = getattr(args, name)
        spec = dataclasses.replace(spec, **changes)
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
    if not _NAME.match(args.study):
        raise UsageError(f"--study must be letters, digits, '_', '.' or '-' (got {args.study!r})")
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


def suggest(
    pilot: Pilot, strategies: tuple[str, ...], train_examples: int, replicas: int = 1
) -> dict[str, Any]:
    """The suggested grid and learning-rate ranges (JSON-ready).

    Sizes are multiples of every strategy's replica count (``replicas``, the pilot's, for one
    not known before it runs: ``auto``, ``mirrored``, ...) and at most the training set.
    """
    unit = 1
    for name in strategies:
        unit = math.lcm(unit, StrategySpec.parse(name).static_replicas or replicas)
    sizes = suggest_batch_sizes(pilot.b_simple, largest=train_examples, unit=unit)
    ranges = learning_rate_ranges(sizes, pilot.batch_size, pilot.learning_rate)
    low, high = study_range(ranges, pilot.learning_rate)
    return {
        "batch_sizes": list(sizes),
        "learning_rate_by_batch_size": {str(b): list(r) for b, r in ranges.items()},
        "learning_rate": [low, high],
        "alphas": list(ALPHAS),
        "strategies": list(strategies),
        "train_examples": train_examples,
    }


def suggested_study(
    plan: Plan, suggestion: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    """The study-file mapping of the suggestion: the file's (or the flags') study with the
    suggested batch sizes and learning-rate range."""
    spec = plan.spec
    low, high = suggestion["learning_rate"]
    if plan.config is not None:
        data = copy.deepcopy(dict(plan.config.raw))
        data["name"] = name or f"{plan.config.name}-suggested"
        space = dict(data["search_space"])
    else:
        data = {
            "name": name or f"{spec.workload}-{spec.model}-suggested".replace(":", "-"),
            "workload": spec.workload,
        }
        if spec.workload_options:
            data["workload_options"] = dict(spec.workload_options)
        data["model"] = spec.model
        data["target"] = str(spec.target)
        budget = dataclasses.asdict(spec.budget)
        data["budget"] = {k: v for k, v in budget.items() if v is not None}
        cadence = spec.cadence
        data["eval_every"] = cadence.every if cadence.kind == "fixed" else str(cadence)
        data["optimizer"] = spec.optimizer.name
        data["schedule"] = spec.schedule.name
        data["seed"] = spec.seed
        if spec.loss is not None:
            data["loss"] = spec.loss
        data["precision"] = spec.precision
        data["jit_compile"] = spec.jit_compile
        data["trials_per_stratum"] = DEFAULT_TRIALS
        space = {"strategy": list(suggestion["strategies"])}
    space["batch_size"] = list(suggestion["batch_sizes"])
    space["learning_rate"] = {"low": low, "high": high, "scale": "log"}
    order = [
        "batch_size",
        "learning_rate",
        *[k for k in space if k not in ("batch_size", "learning_rate")],
    ]
    data["search_space"] = {k: space[k] for k in order}
    return data


def _write(args: argparse.Namespace, plan: Plan, suggestion: dict[str, Any]) -> StudyConfig:
    """Write the suggested study file (checked as `study run` reads it)."""
    import yaml

    from study.config.studyfile import parse_study

    data = suggested_study(plan, suggestion, name=args.study)
    text = yaml.safe_dump(data, sort_keys=False)
    config = parse_study(yaml.safe_load(text), args.write, text=text)
    Path(args.write).write_text(text, encoding="utf-8")
    return config


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
    ledger.set_pilot(pilot.to_dict())
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
            "pilot": pilot.to_dict(),
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


def format_table(pilot: Pilot, rows: int = TABLE_ROWS) -> str:
    """Evaluation steps with B_simple and its 95% interval (at most ``rows``, spread evenly,
    the last and the one where the result is read kept)."""
    points = list(pilot.curve)
    if len(points) > rows:
        last = len(points) - 1
        keep = {round(i * last / (rows - 1)) for i in range(rows)}
        keep |= {i for i, p in enumerate(points) if p[0] == pilot.at_step}
        points = [p for i, p in enumerate(points) if i in keep]
    lines = [f"{'step':>8}  {'B_simple':>10}  {'95% interval':>24}"]
    for step, value, low, high in points:
        lines.append(f"{step:>8}  {_num(value):>10}  {interval_text(low, high):>24}")
    return "\n".join(lines)


def format_suggestion(suggestion: dict[str, Any], pilot: Pilot) -> str:
    sizes = suggestion["batch_sizes"]
    lines = [
        f"suggested batch sizes: {', '.join(map(str, sizes))} (powers of two from about "
        f"B_simple/16 to 16 x B_simple, at most the {suggestion['train_examples']} training "
        "examples)",
        f"learning rate per batch size: the pilot's {pilot.learning_rate:.3g} x "
        f"(B/{pilot.batch_size})^alpha, alpha from {ALPHAS[0]} (square-root rule) to "
        f"{ALPHAS[1]} (linear rule):",
    ]
    for size in sizes:
        low, high = suggestion["learning_rate_by_batch_size"][str(size)]
        lines.append(f"  {size:>8}: {low:.3g} to {high:.3g}")
    low, high = suggestion["learning_rate"]
    lines.append(f"study learning-rate range: {low:.3g} to {high:.3g} (log scale)")
    return "\n".join(lines)


def interval_text(low: float, high: float) -> str:
    """``"26.8 to 90.1"``; ``"26.8 to inf"`` when only the lower end is finite (some resampled
    windows have no positive |G|^2: no upper bound); ``"-"`` when there is none."""
    if not math.isfinite(low):
        return "-"
    return f"{_num(low)} to {_num(high) if math.isfinite(high) else 'inf'}"


def _num(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else ("inf" if value > 0 else "-")
