"""The report's batch-schedule section: the schedule trials against the best fixed batch size.

`schedule_comparison` reads the study's schedule trials (`study.ext.schedules.ledger`: every
schedule it ran, each with its stored section) and their curves, finds when each met the report's target by the same rule as every trial
(`trial_steps_to_target`: the hold rule, read off the evaluations), and compares them with the
fixed batch sizes of the same study on the schedule's strategy (`compare_schedule`). The
report shows its verdict first (plainly "does not win" when it does not), the schedule's
median and spread over its seeds, and one table row per fixed batch size: `SECTION`, the
report's section (`study.extension.ReportSection`: report.json's ``batch_schedules``, the
"Batch schedule" section of report.html and report.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from study.ext.schedules.compare import ScheduleComparison, Spread, compare_schedule
from study.extension import Block, Place, ReportSection
from study.report.tables import Table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.config.study import StudyConfig
    from study.config.target import Target
    from study.ext.schedules.rules import DerivedSchedule
    from study.ledger import Ledger
    from study.report.record import ScalingReport

__all__ = [
    "SECTION",
    "derive_from_report",
    "schedule_comparison",
    "schedule_lines",
    "schedule_table",
]


def schedule_comparison(
    ledger: Ledger, config: StudyConfig | None, table: pd.DataFrame, target: Target
) -> tuple[ScheduleComparison, ...]:
    """One comparison per schedule the study's storage holds trials of (the stored schedule,
    whatever study file ran it; none: empty). ``config`` gives the study's base seed."""
    from study.analysis.load import ledger_table
    from study.analysis.measures import steps_to_result, trial_steps_to_target
    from study.config.schedule import format_stages
    from study.ext.schedules.compare import ScheduleRun
    from study.ext.schedules.ledger import ScheduleLedger

    schedules = ScheduleLedger.of(ledger)
    stored = schedules.schedules()
    if not stored:
        return ()
    base = config.settings.seed if config is not None else 0
    fixed = steps_to_result(table, target, by=("batch_size", "strategy")) if len(table) else table
    every = schedules.measurement_rows(include_running=False)
    out = []
    for cell, trials in stored:
        rows = [(t, curve) for t, curve in every if t.stratum == cell]
        seeds = trials.seed_values(base)
        runs = []
        if rows:
            per_trial = trial_steps_to_target(ledger_table(ledger.name, rows), target)
            numbered = {i: trial.number for i, (trial, _) in enumerate(rows)}  # its order
            for _, row in per_trial.iterrows():
                number = numbered.get(int(row["trial"]), 0)
                runs.append(
                    ScheduleRun(
                        seed=seeds[number % len(seeds)],
                        steps=_count(row["steps_to_target"]),
                        examples=_count(row["examples_to_target"]),
                        seconds=_finite(row["seconds_to_target"]),
                        state=str(row["state"]),
                    )
                )
        label = format_stages(trials.schedule.stages)
        out.append(compare_schedule(fixed, runs, label, strategy=cell.strategy))
    return tuple(out)


def schedule_lines(c: ScheduleComparison) -> list[str]:
    """The section's sentences: the verdict first, then what was measured."""
    head = f"Batch schedule {c.schedule} on {c.strategy}"
    if not c.ok:
        return [f"{head}: no comparison: {c.reason}."]
    assert c.best is not None and c.steps is not None and c.examples is not None
    lines = [f"{head}: {c.verdict}."]
    lines.append(
        f"The schedule's trials ({c.reached} of {len(c.runs)} seeds reached the target): "
        f"steps {c.steps.text()}, examples {c.examples.text()}, training seconds "
        f"{_seconds(c.seconds)} (median, and range over seeds)."
    )
    best = c.best
    spread = (
        f" ({best.steps_low:.0f} to {best.steps_high:.0f} over {best.seeds} seeds of its best point)"
        if best.seeds > 1
        else " (its best trial, one seed)"
    )
    lines.append(
        f"The best fixed batch size, {best.batch_size} (the fewest steps among the batch sizes "
        f"within {c.tolerance:g}x the fewest examples), took {best.steps:.0f} steps{spread}, "
        f"{best.examples:.0f} examples and {best.seconds:.2f} s of training: the schedule's "
        f"ratios are steps {c.ratios['steps']:.2f}x, examples {c.ratios['examples']:.2f}x, "
        f"training seconds {c.ratios['seconds']:.2f}x."
    )
    return lines


def schedule_table(c: ScheduleComparison) -> list[Table]:
    """The schedule's row and each fixed batch size's, in steps, examples and seconds to the
    target (none without a comparison)."""
    if c.steps is None or c.examples is None or c.seconds is None:
        return []
    rows = [
        [
            f"schedule {c.schedule}",
            c.steps.text(),
            c.examples.text(),
            c.seconds.text(".2f"),
            "",
        ]
    ]
    for f in c.fixed:
        spread = Spread(f.steps, f.steps_low, f.steps_high, f.seeds)
        mark = "best fixed" if c.best is not None and f.batch_size == c.best.batch_size else ""
        rows.append(
            [
                f"fixed {f.batch_size}",
                spread.text(),
                _whole(f.examples),
                _seconds_text(f.seconds),
                mark,
            ]
        )
    return [
        Table(
            title="Batch schedule against fixed batch sizes",
            intro="Steps, examples and training seconds to the target: the schedule's median "
            f"and range over its seeds; each fixed batch size's steps to result on {c.strategy}.",
            headers=["run", "steps", "examples", "seconds", ""],
            rows=rows,
            text_columns=(0, 4),
        )
    ]


def _count(value: float) -> int | None:
    return int(value) if math.isfinite(float(value)) else None


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(float(value)) else None


def _whole(value: float) -> str:
    return f"{value:.0f}" if math.isfinite(value) else "not reached"


def _seconds_text(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "not reached"


def _seconds(spread: Spread | None) -> str:
    return spread.text(".2f") if spread is not None else "?"


def derive_from_report(
    report: ScalingReport,
    *,
    rule: str = "double-at-half",
    rate: str = "keep",
    stage_warmup_steps: int = 0,
    strategy: str | None = None,
) -> tuple[DerivedSchedule, str | None]:
    """The schedule `study.ext.schedules.rules` derives from a study's report (its fixed
    batch sizes on ``strategy``, default the study file's first; its CBS(t) for ``rule: cbs``;
    its fitted exponent for ``rate: fit``), and the strategy it is for.

    Raises:
        UsageError: an unknown rule or rate, ``cbs`` without branch trials, no batch size that
            reached the target, ``fit`` without a fitted exponent.
    """
    from study.errors import UsageError
    from study.ext.schedules.rules import RateRule, ScheduleRule, derive_schedule

    rules, rates = [r.value for r in ScheduleRule], [r.value for r in RateRule]
    if rule not in rules:
        raise UsageError(f"rule must be one of {', '.join(rules)} (got {rule!r})")
    if rate not in rates:
        raise UsageError(f"rate must be one of {', '.join(rates)} (got {rate!r})")
    curve = None
    if rule == ScheduleRule.CBS.value:
        cbs = report.section("cbs")  # the branch extension's CBS(t), when it is loaded
        if cbs is None or cbs.curve.empty:
            raise UsageError(
                f"study {report.study} has no CBS(t): run `study branch FILE` on its study file "
                "(a branch: section) first, or use the rule double-at-half"
            )
        curve = cbs.curve
    fitted = report.answers.alpha.estimate if report.answers.ok else None
    table = report.steps_by_strategy
    ran = sorted(set(table["strategy"].astype(str))) if "strategy" in table.columns else []
    if strategy is not None and ran and strategy not in ran:
        raise UsageError(
            f"study {report.study} has no trials on strategy {strategy!r}; "
            f"choose one of {', '.join(ran)}"
        )
    if strategy is None and ran:  # the study file's first strategy, as its trials name it
        config = report.facts.config
        first = str(config.space.strategies[0]) if config is not None else ""
        strategy = first if first in ran else ran[0]
    try:
        derived = derive_schedule(
            table, rule=rule, rate=rate, fitted_alpha=fitted, cbs_curve=curve,
            stage_warmup_steps=stage_warmup_steps, strategy=strategy,
        )  # fmt: skip
    except ValueError as err:
        raise UsageError(f"study {report.study}: {err}") from None
    return derived, strategy


def _build(ledger: Ledger, config: StudyConfig | None, report: ScalingReport) -> Any:
    return schedule_comparison(ledger, config, report.table, report.target)


def _blocks(comparisons: tuple[ScheduleComparison, ...]) -> list[Block]:
    return [Block(tuple(schedule_lines(c)), tuple(schedule_table(c))) for c in comparisons]


SECTION = ReportSection(
    key="batch_schedules",
    title="Batch schedule",
    anchor="schedule",
    build=_build,
    to_json=lambda comparisons: [c.to_dict() for c in comparisons or ()],
    blocks=_blocks,
    place=Place.BEFORE_TABLES,
)
"""Each schedule's trials against the best fixed batch size, in the scaling report."""
