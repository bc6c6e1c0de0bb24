"""`study probe NAME`: seconds per step per (batch size, strategy), for the time-to-result model.

For every (batch size, strategy) of the study (or of ``--batch-sizes`` / ``--strategies``) a
short run of ``--steps`` steps trains the study's workload through the trainer's worker pool,
``--repeats`` times after one untimed warm-up run: a target no run can meet, one evaluation at
the end, no replay (``exact_steps`` off), no MLflow run. The trainer's training seconds
exclude building, tracing, its warm-up step and evaluation, and the repeats reuse the warm
session, so what is timed is the compiled training steps. The median seconds per step over the
repeats (with their spread) is stored with the study (``ledger.notes.set_throughput``, one
`ThroughputRow` per (batch size, strategy): a new probe of
a (batch size, strategy) replaces the old one; others are kept), printed as a table (or JSON),
and used by ``study report`` (`study.analysis.time_model`). Nothing the study recorded is
touched: probe runs are not trials.

Example::

    study probe quickstart --steps 200 --repeats 5
    study probe quickstart --batch-sizes 64 512 --strategies default mirrored:2 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from study.config.rules import FieldError
from study.config.space import Stratum
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, TrialSpec
from study.errors import UsageError
from study.ledger.notes import ThroughputRow
from study.results import TrialResult, TrialState
from study.strategies import StrategySpec, check_batch_divisible

if TYPE_CHECKING:
    from study.config.study import StudyConfig
    from study.ledger import Ledger
    from study.runner import WorkerPool

DEFAULT_STEPS = 100
"""Training steps per probe run."""
DEFAULT_REPEATS = 3
"""Probe runs per (batch size, strategy); the median counts."""


@dataclasses.dataclass(frozen=True)
class ProbePlan:
    """What a probe runs: every (batch size, strategy), ``steps`` steps, ``repeats`` times."""

    batch_sizes: tuple[int, ...]
    strategies: tuple[str, ...]
    steps: int
    repeats: int

    def pairs(self) -> list[tuple[int, str]]:
        """Every (batch size, strategy), strategy major, so consecutive runs share a worker."""
        return [(b, s) for s in self.strategies for b in self.batch_sizes]


def main(args: argparse.Namespace) -> int:
    """Probe study ``args.name``, store and print the result; return the exit status."""
    from study.deps import require_tensorflow
    from study.host import environment_info
    from study.ledger import Ledger

    ledger = Ledger.open(args.storage, args.name, create=False)
    record = ledger.require()  # UsageError for an unknown study: nothing is created
    config = study_config(args.name, record.config_text, record.config_source)
    plan = make_plan(config, args.batch_sizes, args.strategies, args.steps, args.repeats)
    require_tensorflow()
    from study.runner import WorkerPool

    facts = {
        "measured_at": _now(),
        "hardware": hardware_text(environment_info()),
        "steps": plan.steps,
        "repeats": plan.repeats,
    }
    rows = []
    with WorkerPool(1) as pool:
        for batch_size, strategy in plan.pairs():
            spec = probe_spec(
                config, batch_size, strategy, plan.steps, _rate(ledger, config, batch_size)
            )
            print(f"probing batch size {batch_size} on {strategy} ...", file=sys.stderr, flush=True)
            row = probe_row(spec, _repeat(pool, spec, plan.repeats))
            rows.append(dataclasses.replace(row, **facts))
    ledger.notes.set_throughput(merge_rows(ledger.notes.throughput(), rows))
    if args.json:
        stored = [row.to_stored() for row in rows]
        print(
            json.dumps({"study": args.name, "rows": stored}, indent=2, allow_nan=False, default=str)
        )
    else:
        print(format_table(args.name, rows, facts))
    return 0 if any(r.seconds_per_step is not None for r in rows) else 1


# ------------------------------------------------------------------------------------ the plan


def study_config(name: str, text: str | None, source: str | None) -> StudyConfig:
    """The study file stored in the ledger, parsed; `UsageError` for an imported study (it has
    no workload to run)."""
    if not text:
        raise UsageError(
            f"study {name!r} was imported and has no workload to run, so it cannot be probed; "
            "probe a study made from a study file"
        )
    import yaml

    from study.config.studyfile import parse_study

    return parse_study(yaml.safe_load(text), source or f"<study {name}>", text=text)


def make_plan(
    config: StudyConfig,
    batch_sizes: Sequence[int] | None,
    strategies: Sequence[str] | None,
    steps: int,
    repeats: int,
) -> ProbePlan:
    """The probe's plan: the given batch sizes and strategies, or the study's.

    Raises:
        UsageError: ``--steps`` or ``--repeats`` below 1, a batch size below 1, an unknown
            strategy, or a batch size a strategy's replicas do not divide (each named by its
            flag).
    """
    if steps < 1:
        raise UsageError(f"--steps must be at least 1 (got {steps})")
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1 (got {repeats})")
    sizes = tuple(dict.fromkeys(batch_sizes or config.space.batch_sizes))
    names = tuple(dict.fromkeys(strategies or config.space.strategies))
    bad = [b for b in sizes if b < 1]
    if bad:
        raise UsageError(f"--batch-sizes must be at least 1 (got {bad[0]})")
    for name in names:
        replicas = StrategySpec.parse(name, option="--strategies").static_replicas
        for batch in sizes:
            if replicas:
                try:
                    check_batch_divisible(batch, replicas, strategy=name)
                except FieldError as err:
                    raise err.named("--batch-sizes") from None
    return ProbePlan(sizes, names, steps, repeats)


def probe_spec(
    config: StudyConfig, batch_size: int, strategy: str, steps: int, learning_rate: float
) -> TrialSpec:
    """The study's trial at ``batch_size`` on ``strategy`` as a probe run: ``steps`` steps, a
    target no run meets (the study's metric, threshold infinite), one evaluation at the end,
    no replay and no noise-scale measurement."""
    stratum = config.strata[0]  # any stratum of the study: batch size and strategy set below
    spec = config.trial_spec(stratum, {"learning_rate": learning_rate})
    target = config.target
    never = Target(target.metric, target.op, math.inf if target.maximize else -math.inf)
    timed = spec.with_settings(
        budget=Budget(max_steps=steps),
        cadence=EvalCadence(kind="fixed", every=steps),
        exact_steps=False,
        noise_scale=False,
    )
    return dataclasses.replace(timed, batch_size=batch_size, strategy=strategy, target=never)


def _rate(ledger: Ledger, config: StudyConfig, batch_size: int) -> float:
    """The learning rate to probe with (it does not change the cost of a step, but a rate that
    diverges would cut the run short): the study's best at the batch size on any strategy,
    else the low end of its searched range."""
    for strategy in config.space.strategies:
        best = ledger.best(Stratum(batch_size, strategy))
        if best is not None and math.isfinite(best.learning_rate) and best.learning_rate > 0:
            return float(best.learning_rate)
    searched = config.space.params[0]  # always learning_rate: a range or choices
    return float(getattr(searched, "low", None) or min(getattr(searched, "choices", (0.01,))))


# ------------------------------------------------------------------------------------ running


def _repeat(pool: WorkerPool, spec: TrialSpec, repeats: int) -> list[TrialResult]:
    """Run ``spec`` once untimed (the warm-up: building, tracing, first calls), then
    ``repeats`` times; a bad trial (a `UsageError` in the worker) is raised at once, before
    anything is stored."""
    results = []
    for run in range(repeats + 1):
        result = pool.run(spec)
        if result.usage_error is not None:
            raise UsageError(result.usage_error)
        if result.state in (TrialState.FAILED, TrialState.INFEASIBLE):
            return [*results, result]  # it will not run the next time either
        if run:
            results.append(result)
    return results


def probe_row(spec: TrialSpec, results: Sequence[TrialResult]) -> ThroughputRow:
    """One stored row: the median seconds per step over the runs that trained all their
    steps, their spread (``seconds_low``, ``seconds_high``) and every sample; or, when none
    did, ``seconds_per_step`` None and the ``error``.

    Example: runs of 100 steps in 0.21, 0.20 and 0.25 s give ``seconds_per_step == 0.0021``,
    ``seconds_low == 0.002`` and ``seconds_high == 0.0025``.
    """
    samples = [
        r.train_seconds / r.steps_run
        for r in results
        if r.state is TrialState.NOT_REACHED
        and r.steps_run == spec.settings.budget.max_steps
        and r.train_seconds > 0
    ]
    environment = next((r.environment for r in results if r.environment), {})
    replicas = environment.get("replicas") or StrategySpec.parse(spec.strategy).static_replicas
    error = None
    if not samples:
        last = results[-1] if results else None
        why = (last.error or "").strip().splitlines()[-1:] if last else []
        state = last.state.value if last else "not run"
        error = f"{state}: {why[0]}" if why else state
    return ThroughputRow(
        batch_size=spec.batch_size,
        strategy=spec.strategy,
        replicas=replicas,
        seconds_per_step=statistics.median(samples) if samples else None,
        seconds_low=min(samples) if samples else None,
        seconds_high=max(samples) if samples else None,
        samples=tuple(samples),
        learning_rate=spec.learning_rate,
        devices=environment.get("devices", ""),
        tensorflow=environment.get("tensorflow", ""),
        error=error,
    )


def merge_rows(
    stored: Sequence[ThroughputRow], new: Sequence[ThroughputRow]
) -> list[ThroughputRow]:
    """The stored rows with ``new`` ones replacing those of the same (batch size, strategy),
    sorted by strategy then batch size."""
    merged = {r.key: r for r in stored}
    merged.update({r.key: r for r in new})
    return [merged[key] for key in sorted(merged, key=lambda k: (k[1], k[0]))]


# ------------------------------------------------------------------------------------ output


def hardware_text(info: Mapping[str, Any]) -> str:
    """The host as the report names it, e.g. ``"Intel(R) Xeon(R) CPU @ 2.20GHz (2 CPUs)"`` or
    ``"GPU 0: NVIDIA A100 (2 CPUs)"`` (`study.host.environment_info`)."""
    cpus = f"{info.get('cpus')} CPUs" if info.get("cpus") else "CPUs unknown"
    gpus = list(info.get("gpus") or [])
    device = ", ".join(gpus) if gpus else (info.get("cpu_model") or "unknown CPU")
    return f"{device} ({cpus})"


def format_table(study: str, rows: Sequence[ThroughputRow], facts: Mapping[str, Any]) -> str:
    """The probe's rows as a table for a terminal, with how they were measured."""
    lines = [
        f"probe of {study}: {facts['steps']} steps x {facts['repeats']} repeat(s) per batch "
        f"size and strategy, {facts['hardware']}, {facts['measured_at']}",
        f"{'batch':>7}  {'strategy':<16}{'replicas':>9}{'s/step (median)':>17}"
        f"{'spread':>24}{'examples/s':>12}",
    ]
    for row in rows:
        seconds = row.seconds_per_step
        if seconds is None:
            lines.append(
                f"{row.batch_size:>7}  {row.strategy:<16}{row.replicas or '-':>9}"
                f"  no measurement ({row.error or 'unknown'})"
            )
            continue
        spread = f"{row.seconds_low:.3g} to {row.seconds_high:.3g}"
        lines.append(
            f"{row.batch_size:>7}  {row.strategy:<16}{row.replicas:>9}"
            f"{seconds:>17.3g}{spread:>24}{row.batch_size / seconds:>12,.0f}"
        )
    lines.append("stored with the study: `study report` predicts the time to result from it")
    return "\n".join(lines)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
