"""A batch-size schedule against the study's best fixed batch size (pure pandas).

The schedule trials (``batch_schedule:``, one per seed) are set against the fixed batch sizes
of the same study, workload, target and strategy, in steps to target (optimizer steps),
examples to target (the sum of the batches) and training seconds to target (only training is
timed, as for every trial).

**The best fixed batch size** is the one that reaches the target in the fewest steps among
those that need at most `EXAMPLES_TOLERANCE` times the fewest examples any fixed batch size
needed: the largest batch still in (near-)perfect scaling, where more parallelism costs no
more data (Shallue et al.). A larger fixed batch takes fewer steps by spending more data,
a smaller one more steps for no saving; a schedule is worth having when it takes fewer steps
than this one at no more than `EXAMPLES_TOLERANCE` times its examples, which no fixed batch
size can (McCandlish et al.: the critical batch size grows in training, a fixed one is a
compromise). **The schedule wins** when every seed reached the target, its median steps are
fewer than the best fixed batch size's and its median examples at most `EXAMPLES_TOLERANCE`
times its examples; the comparison says plainly when it does not, and why.

Each fixed batch size's steps are the study's steps to result (its best trial, or the median
over seeds of its best point with confirmation trials, `summarize_trials`); the schedule's are
the median over its seeds with their range (min to max) as the spread.

Example::

    runs = [ScheduleRun(0, 300, 20_000, 1.2), ScheduleRun(1, 320, 21_000, 1.3), ...]
    c = compare_schedule(steps_to_result_table, runs, "32@0,128@40960")
    c.wins, c.verdict        # False, "the schedule does not win: ..."
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "EXAMPLES_TOLERANCE",
    "FixedBatch",
    "ScheduleComparison",
    "ScheduleRun",
    "Spread",
    "best_fixed",
    "compare_schedule",
    "fixed_batches",
]

#: How many times the fewest examples a fixed batch size (and the schedule) may spend.
EXAMPLES_TOLERANCE = 1.1


@dataclass(frozen=True)
class ScheduleRun:
    """One schedule trial: its seed, and steps, examples and training seconds to the target
    (None: not reached), with how it ended."""

    seed: int
    steps: int | None
    examples: int | None
    seconds: float | None
    state: str = "reached"

    @property
    def reached(self) -> bool:
        return self.steps is not None


@dataclass(frozen=True)
class Spread:
    """A median over seeds with its range (``low`` to ``high``) and the seeds it is over
    (``inf`` for a seed that never reached the target)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        data = np.asarray([math.inf if v is None else float(v) for v in values], dtype=float)
        if data.size == 0:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(float(np.median(data)), float(data.min()), float(data.max()), int(data.size))

    def text(self, digits: str = ".0f") -> str:
        """``412 (380 to 455, 3 seeds)``; ``not reached`` for an infinite median."""
        if not math.isfinite(self.median):
            return "not reached"
        if self.n < 2:
            return f"{self.median:{digits}}"
        return f"{self.median:{digits}} ({self.low:{digits}} to {_num(self.high, digits)}, {self.n} seeds)"


@dataclass(frozen=True)
class FixedBatch:
    """A fixed batch size of the study: steps (with its spread over seeds, 1 seed without
    confirmation trials), examples and training seconds to the target."""

    batch_size: int
    steps: float
    steps_low: float
    steps_high: float
    seeds: int
    examples: float
    seconds: float


@dataclass(frozen=True)
class ScheduleComparison:
    """The schedule's trials against the fixed batch sizes (see the module docstring).

    ``ratios`` are the schedule's medians over the best fixed batch size's (steps, examples,
    seconds); ``ok`` False (and a ``reason``) when there is nothing to compare.
    """

    ok: bool
    reason: str
    schedule: str
    strategy: str
    runs: tuple[ScheduleRun, ...] = ()
    steps: Spread | None = None
    examples: Spread | None = None
    seconds: Spread | None = None
    fixed: tuple[FixedBatch, ...] = ()
    best: FixedBatch | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    wins: bool = False
    verdict: str = ""
    tolerance: float = EXAMPLES_TOLERANCE

    @property
    def reached(self) -> int:
        return sum(run.reached for run in self.runs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinities as None)."""
        return _clean(asdict(self))


def fixed_batches(table: pd.DataFrame, strategy: str | None = None) -> list[FixedBatch]:
    """The fixed batch sizes of a `summarize_trials` table (per batch size, or per batch size
    and strategy: ``strategy``'s rows), smallest first."""
    rows = table
    if strategy is not None and "strategy" in table.columns:
        rows = table[table["strategy"].astype(str) == strategy]
    out = []
    for _, row in rows.sort_values("batch_size").iterrows():
        out.append(
            FixedBatch(
                batch_size=int(row["batch_size"]),
                steps=float(row["steps_to_result"]),
                steps_low=float(row.get("steps_low", row["steps_to_result"])),
                steps_high=float(row.get("steps_high", row["steps_to_result"])),
                seeds=int(row.get("seeds", 1)),
                examples=_finite_or_inf(row["examples_to_result"]),
                seconds=_finite_or_inf(row["seconds_to_result"]),
            )
        )
    return out


def best_fixed(
    fixed: Sequence[FixedBatch], tolerance: float = EXAMPLES_TOLERANCE
) -> FixedBatch | None:
    """The fewest steps among the batch sizes within ``tolerance`` times the fewest examples
    (ties: the smaller batch); None when no fixed batch size reached the target."""
    reached = [f for f in fixed if math.isfinite(f.steps) and math.isfinite(f.examples)]
    if not reached:
        return None
    fewest = min(f.examples for f in reached)
    thrifty = [f for f in reached if f.examples <= tolerance * fewest]
    return min(thrifty, key=lambda f: (f.steps, f.batch_size))


def compare_schedule(
    table: pd.DataFrame,
    runs: Sequence[ScheduleRun],
    schedule: str,
    *,
    strategy: str = "default",
    tolerance: float = EXAMPLES_TOLERANCE,
) -> ScheduleComparison:
    """The schedule's ``runs`` against the fixed batch sizes of ``table`` (a `summarize_trials`
    table of the study, by batch size and strategy) on ``strategy``."""
    base = {"schedule": schedule, "strategy": strategy, "runs": tuple(runs), "tolerance": tolerance}
    if not runs:
        return ScheduleComparison(False, "no schedule trial has finished", **base)
    fixed = fixed_batches(table, strategy)
    steps = Spread.of([r.steps for r in runs])
    examples = Spread.of([r.examples for r in runs])
    seconds = Spread.of([r.seconds for r in runs])
    measured = {**base, "steps": steps, "examples": examples, "seconds": seconds}
    best = best_fixed(fixed, tolerance)
    if best is None:
        reason = f"no fixed batch size on {strategy} reached the target"
        return ScheduleComparison(False, reason, fixed=tuple(fixed), **measured)
    ratios = {
        "steps": steps.median / best.steps,
        "examples": examples.median / best.examples,
        "seconds": seconds.median / best.seconds if best.seconds > 0 else math.nan,
    }
    wins, verdict = _verdict(runs, ratios, best, tolerance)
    return ScheduleComparison(
        True,
        "",
        fixed=tuple(fixed),
        best=best,
        ratios=ratios,
        wins=wins,
        verdict=verdict,
        **measured,
    )


def _verdict(
    runs: Sequence[ScheduleRun], ratios: dict[str, float], best: FixedBatch, tolerance: float
) -> tuple[bool, str]:
    """Whether the schedule wins, and the sentence that says so (or why not)."""
    against = f"the best fixed batch size ({best.batch_size})"
    missed = [r.seed for r in runs if not r.reached]
    if missed:
        seeds = ", ".join(str(s) for s in missed)
        return False, (
            f"the schedule does not win: seed(s) {seeds} of {len(runs)} never reached the target"
        )
    steps, examples = ratios["steps"], ratios["examples"]
    fewer = steps < 1.0
    thrifty = examples <= tolerance
    if fewer and thrifty:
        return True, (
            f"the schedule wins: {_times(steps)} the steps of {against} with {_times(examples)} "
            f"its examples (at most {tolerance:g}x allowed), median over {len(runs)} seeds"
        )
    why = []
    if not fewer:
        why.append(f"it takes {_times(steps)} the steps of {against}")
    if not thrifty:
        why.append(f"it spends {_times(examples)} its examples (more than {tolerance:g}x)")
    return False, f"the schedule does not win: {' and '.join(why)}, median over {len(runs)} seeds"


def _times(ratio: float) -> str:
    return f"{ratio:.2f}x" if math.isfinite(ratio) else "inf x"


def _num(value: float, digits: str) -> str:
    return f"{value:{digits}}" if math.isfinite(value) else "not reached"


def _finite_or_inf(value: Any) -> float:
    number = float(value) if value is not None and not pd.isna(value) else math.inf
    return number if math.isfinite(number) else math.inf


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
