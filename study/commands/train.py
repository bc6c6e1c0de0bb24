"""`study train`: one trial, trained in a worker and logged to MLflow.

Its flags are the fields of `study.config.definition.TrialDefinition`
(`study.commands.trial_flags`); the definition, the data model and the workload resolver check
the values and raise `FieldError` on a field, which `build_spec` renames to its flag
(`study.commands.flags`): "--lr must be > 0 (got -1.0)", "--csv: cannot read 'x.csv': ...".
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from study.analysis.pilot import noise_at_result
from study.commands.flags import in_flags, problem_in_flags
from study.commands.trial_flags import TRIAL_FLAGS, definition_of
from study.config.rules import FieldError
from study.config.schedule import format_stages
from study.config.trial import TrialSpec
from study.errors import UsageError
from study.results import TrialResult, TrialState


def workload_options(args: argparse.Namespace) -> dict[str, Any]:
    """Workload options from the dedicated flags and ``--workload-option KEY=VALUE``."""
    options: dict[str, Any] = {}
    for item in args.workload_options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--workload-option: expected KEY=VALUE (got {item!r})")
        options[key.strip()] = _scalar(value)
    if args.samples is not None:
        options["samples"] = args.samples
    for flag, key in (("csv", "path"), ("label", "label"), ("text_column", "text_column")):
        value = getattr(args, flag)
        if value is not None:
            if args.workload != "csv":
                raise UsageError(f"--{flag.replace('_', '-')} applies only to --workload csv")
            options[key] = value
    return options


def build_spec(args: argparse.Namespace) -> TrialSpec:
    """Validate every option (no TensorFlow) and build the trial spec.

    Raises:
        UsageError: one line naming the flag, e.g. "--lr must be > 0 (got -1.0)".
    """
    from study.runner.single import resolve_trial

    options = workload_options(args)
    if args.workload == "csv" and "path" not in options:
        raise UsageError("--workload csv needs --csv FILE and --label COLUMN")
    if args.workload == "csv" and "label" not in options:
        raise UsageError("--workload csv needs --label COLUMN")
    try:
        return definition_of(args, workload_options=options).spec(resolve_trial, called=_flag)
    except FieldError as err:
        if err.name == err.field and err.field in TRIAL_FLAGS:  # a field of the definition
            raise err.named(_flag(err.field)) from None
        raise in_flags(err, workload=args.workload) from None


def _flag(name: str) -> str:
    """The flag of a field of `TrialDefinition` (``learning_rate``: ``--lr``)."""
    return TRIAL_FLAGS[name].flag


def _flag_named(problem: str, workload: str) -> str:
    """A worker's message about a field, named by this command's flag (``target:`` ->
    ``--target:``, ``workload_options.path:`` -> ``--csv:``)."""
    return problem_in_flags(problem, workload=workload)


def main(args: argparse.Namespace) -> int:
    spec = build_spec(args)
    from study.deps import require_tensorflow

    require_tensorflow()
    name = f"{spec.workload}-b{spec.batch_size}-lr{spec.learning_rate:g}"
    if spec.batch_schedule is not None:
        name = f"{spec.workload}-schedule-{format_stages(spec.batch_schedule.stages)}"
    result, run_id, logger = run_tracked(args, spec, name)
    if logger and run_id:
        logger.log_trial(run_id, spec, result)
    _print(spec, result, run_id, args.json)
    return 0 if result.state is not TrialState.FAILED else 1


def _print(spec: TrialSpec, result: TrialResult, run_id: str | None, as_json: bool) -> None:
    summary = {
        "status": result.state.value,
        "steps_to_target": result.steps_to_target,
        "examples_to_target": result.examples_to_target,
        "seconds_to_target": result.seconds_to_target,
        "target_hold": spec.target.hold.to_param(),
        "fell_back": [list(pair) for pair in result.fell_back],
        "steps_run": result.steps_run,
        "train_seconds": round(result.train_seconds, 4),
        "steps_per_second": _round(result.steps_per_second),
        "examples_per_second": _round(result.examples_per_second),
        "final": dict(result.curve[-1].metrics) if result.curve else {},
        "environment": dict(result.environment),
        "mlflow_run_id": run_id,
    }
    noise = noise_at_result(result)
    if noise:
        summary["noise"] = {
            "step": noise[0],
            **{k: v if math.isfinite(v) else None for k, v in noise[1].items()},
        }
    if as_json:
        print(json.dumps(summary, default=str))
        return
    env = result.environment
    print(
        f"{spec.workload}/{spec.model} batch {spec.batch_size} lr {spec.learning_rate:g} "
        f"on {env.get('strategy', spec.strategy)} ({env.get('replicas', '?')} replica(s)): "
        f"{result.state.value}"
    )
    if spec.batch_schedule is not None:
        plan = spec.batch_schedule
        stages = ", ".join(
            f"{s.batch_size} from {s.from_examples} (lr {plan.learning_rate_for(s.batch_size):.3g})"
            for s in plan.stages
        )
        print(f"  batch schedule: {stages}")
    if result.state is TrialState.REACHED:
        print(
            f"  target {spec.target} at step {result.steps_to_target} "
            f"({result.examples_to_target} examples, {result.seconds_to_target:.2f} s of training)"
        )
        if spec.target.hold.active:
            window = spec.target.hold.window(result.steps_to_target or 0)
            print(
                f"  held through step {(result.steps_to_target or 0) + window} (the rule: "
                f"{spec.target.hold})"
            )
    elif result.curve:
        last = result.curve[-1]
        value = last.metrics.get(spec.target.metric, math.nan)
        print(
            f"  target {spec.target} not met; {spec.target.metric}={value:.4f} at step {last.step}"
        )
    print(
        f"  {result.steps_run} steps in {result.train_seconds:.2f} s: "
        f"{result.steps_per_second:.1f} steps/s, {result.examples_per_second:.0f} examples/s"
    )
    if result.fell_back:
        (met, fell), count = result.fell_back[0], len(result.fell_back)
        print(
            f"  {count} crossing(s) did not hold: first met at step {met}, missed again at "
            f"step {fell}"
        )
    if noise:
        print(f"  {describe_noise(*noise)}")
    if result.error:
        print(f"  error: {result.error.strip().splitlines()[-1]}")
    if run_id:
        print(f"  MLflow run {run_id}")


def describe_noise(step: int, noise: dict[str, float]) -> str:
    """``B_simple = 412 (95% interval 301 to 560) at step 900``, or why there is no value yet."""
    value = noise.get("b_simple", math.nan)
    if not math.isfinite(value):
        return f"B_simple: no estimate yet at step {step} (|G|^2 not yet positive on average)"
    low, high = noise.get("b_simple_low", math.nan), noise.get("b_simple_high", math.nan)
    interval = (
        f" (95% interval {low:.3g} to {high:.3g})"
        if math.isfinite(low) and math.isfinite(high)
        else " (no interval yet: too few steps measured)"
    )
    return f"B_simple = {value:.3g}{interval} at step {step}"


def _round(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def _scalar(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def run_tracked(
    args: argparse.Namespace, spec: TrialSpec, run_name: str
) -> tuple[TrialResult, str | None, Any]:
    """`train_one` with this command's flags (``--no-track``, ``--tracking-uri``,
    ``--experiment``), problems named by flag."""
    from study.runner.single import Tracking, train_one

    tracking = None if args.no_track else Tracking(args.experiment, args.tracking_uri)
    return train_one(
        spec, run_name, tracking, named=lambda problem: _flag_named(problem, spec.workload)
    )
