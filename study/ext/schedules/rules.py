"""A batch-size schedule derived from a finished study by a stated rule (pure pandas/numpy).

A schedule is worth trying only against the study's best fixed batch size ``B*``
(`study.ext.schedules.compare.best_fixed`: the fewest steps within 1.1x the fewest
examples), so every rule here starts at ``B*`` at its best learning rate (the study's best
point there) and never trains below it:

- ``double-at-half`` (`ScheduleRule.DOUBLE_AT_HALF`): ``B*``, then ``2 B*`` from half the
  examples ``B*`` needed to the target. The critical batch size grows in training (McCandlish
  et al.; CBS(t) of `study branch`), so by half-way it is past ``2 B*`` on the workloads
  measured; one doubling keeps the examples near ``B*``'s.
- ``cbs`` (`ScheduleRule.CBS`): the CBS(t) schedule of the study's branch trials
  (`study.config.schedule.schedule_under` its CBS) with every stage raised to at least ``B*``.

Later stages' learning rate (`RateRule`): ``keep`` holds ``B*``'s rate (alpha 0: the larger
batch only cuts the gradient noise, as a rate decay would, Smith et al. 2017); ``local`` scales
it by the power law through the study's best rates at the schedule's batch sizes; ``fit`` by
the study's fitted exponent over every batch size. Measured on the MNIST-1D MLP
(`benchmarks/batch_schedule.py`): ``double-at-half`` with ``keep`` reached 60% in 0.68x
``B*``'s steps with 0.85x its examples, where ``fit`` overshot the larger batch's best rate.

Example::

    derived = derive_schedule(steps_by_batch, rule="double-at-half", rate="keep")
    derived.schedule.snippet(), derived.why
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.config.schedule import BatchSchedule, Stage, schedule_under
from study.ext.schedules.compare import best_fixed, fixed_batches

__all__ = ["DerivedSchedule", "RateRule", "ScheduleRule", "derive_schedule", "local_alpha"]


class ScheduleRule(str, enum.Enum):
    """Where the stages come from (see the module docstring)."""

    DOUBLE_AT_HALF = "double-at-half"
    CBS = "cbs"


class RateRule(str, enum.Enum):
    """How a later stage's learning rate follows its batch size."""

    KEEP = "keep"
    LOCAL = "local"
    FIT = "fit"


@dataclass(frozen=True)
class DerivedSchedule:
    """A schedule with the study's facts it came from: ``B*``, its best rate and examples to
    the target, and one sentence per choice (``why``)."""

    schedule: BatchSchedule
    best_batch: int
    best_rate: float
    best_examples: float
    why: tuple[str, ...]


def local_alpha(steps: pd.DataFrame, sizes: list[int]) -> float | None:
    """The slope of log best rate on log batch size over ``sizes``' best rates (least squares;
    None with fewer than two of them measured)."""
    best = dict(zip(steps["batch_size"].astype(int), steps["best_learning_rate"], strict=True))
    known = [(b, float(best[b])) for b in sizes if b in best and _positive(best[b])]
    if len(known) < 2:
        return None
    x = np.log([b for b, _ in known])
    y = np.log([r for _, r in known])
    return float(np.polyfit(x, y, 1)[0])


def derive_schedule(
    steps: pd.DataFrame,
    *,
    rule: ScheduleRule | str = ScheduleRule.DOUBLE_AT_HALF,
    rate: RateRule | str = RateRule.KEEP,
    fitted_alpha: float | None = None,
    cbs_curve: pd.DataFrame | None = None,
    stage_warmup_steps: int = 0,
    strategy: str | None = None,
) -> DerivedSchedule:
    """The schedule of ``rule`` from a study's steps-to-result table (`summarize_trials`: by
    batch size, or by batch size and strategy with ``strategy`` chosen), later stages rated by
    ``rate``; ``fitted_alpha`` is the study's exponent (``rate: fit``), ``cbs_curve`` its
    CBS(t) (`cbs_curve` rows, ``rule: cbs``).

    Raises:
        ValueError: an unknown rule, no batch size that reached the target, ``rate: fit``
            without an exponent, ``rule: cbs`` without a CBS(t) curve.
    """
    rule = ScheduleRule(rule)
    rate = RateRule(rate)
    table = steps
    if strategy is not None and "strategy" in steps.columns:
        table = steps[steps["strategy"].astype(str) == strategy]
    best = best_fixed(fixed_batches(table))
    if best is None:
        raise ValueError("no fixed batch size reached the target: there is no B* to start from")
    row = table[table["batch_size"].astype(int) == best.batch_size].iloc[0]
    lr0 = float(row["best_learning_rate"])
    why = [
        f"B* = {best.batch_size}: the fewest steps ({best.steps:.0f}) among the batch sizes "
        f"within 1.1x the fewest examples, at its best rate {lr0:.4g}"
    ]
    if rule is ScheduleRule.DOUBLE_AT_HALF:
        start = max(1, int(best.examples // 2))
        stages = [Stage(0, best.batch_size), Stage(start, 2 * best.batch_size)]
        why.append(
            f"double at half: {2 * best.batch_size} from {start:,} examples, half of the "
            f"{best.examples:,.0f} B* needed to the target"
        )
    else:
        if cbs_curve is None or cbs_curve.empty:
            raise ValueError("rule cbs needs the study's CBS(t): run `study branch` first")
        grid = sorted({int(b) for b in table["batch_size"]})
        limits = zip(cbs_curve["examples"], cbs_curve["cbs"], strict=True)
        derived = schedule_under(
            limits, b0=best.batch_size, grid=grid, learning_rate=lr0, alpha=0.0
        )
        stages = list(derived.stages)
        why.append(
            "CBS(t) floored at B*: from each checkpoint the largest batch size of the study "
            f"not above its CBS, at least {best.batch_size}, never falling"
        )
    alpha = _alpha(rate, table, [s.batch_size for s in stages], fitted_alpha, why)
    schedule = BatchSchedule(
        tuple(stages), lr0, alpha, warmup_steps=0, stage_warmup_steps=stage_warmup_steps
    )
    return DerivedSchedule(schedule, best.batch_size, lr0, best.examples, tuple(why))


def _alpha(
    rate: RateRule, table: pd.DataFrame, sizes: list[int], fitted: float | None, why: list[str]
) -> float:
    if rate is RateRule.KEEP or len(sizes) < 2:
        why.append("the rate is kept: a larger batch only cuts the gradient noise (alpha 0)")
        return 0.0
    if rate is RateRule.FIT:
        if fitted is None or not math.isfinite(fitted):
            raise ValueError("rate fit needs the study's fitted alpha, and the study has none")
        why.append(f"the rate scales as B^{fitted:.3g}: the study's fitted exponent")
        return float(fitted)
    local = local_alpha(table, sizes)
    if local is None:
        why.append("the rate is kept: fewer than two of its batch sizes have a best rate")
        return 0.0
    why.append(f"the rate scales as B^{local:.3g}: the study's best rates at {sizes}")
    return local


def _positive(value: object) -> bool:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and number > 0
