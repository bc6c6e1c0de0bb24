"""More replicates where CBS(t) is not yet resolved: `study branch`'s later rounds.

The first round runs ``replicates`` branches per (checkpoint, batch size). Its noise is not the
same over training: early the branches' progress over a window is large against their spread,
late it is small but a larger batch is often plainly as good (its excess is far below the
tolerance), so a fixed count is too many at some checkpoints and too few at others. After each
round, every checkpoint whose CBS interval is wider than ``resolve`` (high / low; an interval
open upwards counts as resolved only when its low end is the largest batch size tried) gets one
more replicate at every batch size, the widest first, up to ``max_replicates`` per
checkpoint and while the branches' examples stay within ``max_examples`` (`round_cap`: with
the finished study's defaults, also within their runs of the reference's own examples to the
target, known once it ran). A checkpoint without
a CBS (the reference made no progress there) gets none: more replicates cannot give it one.

Any process running ``study branch`` on the storage adds a round once none is waiting or
running; the ledger queues a branch once (`BranchLedger.enqueue_new`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from study.config.study import StudyConfig
from study.ext.branch.defaults import ROUNDS_SHARE, RUNS
from study.ext.branch.ledger import BranchLedger
from study.ext.branch.plan import BranchPlan, branch_tasks

__all__ = ["more_replicates", "round_cap", "unresolved"]


def unresolved(curve: pd.DataFrame, largest: int, resolve: float) -> list[int]:
    """The checkpoints of a `cbs_curve` table whose interval is wider than ``resolve``, the
    widest first (an interval open upwards is the widest; ties: the earlier checkpoint)."""
    found = []
    for _, row in curve.sort_values("examples").iterrows():
        low, high, mid = (float(row[k]) for k in ("cbs_low", "cbs_high", "cbs"))
        if not math.isfinite(mid) or not low > 0:
            continue
        if math.isinf(high) and low >= largest:
            continue  # at least the largest batch size, surely
        if high / low > resolve:
            found.append((-(high / low), float(row["examples"]), int(row["checkpoint"])))
    return [checkpoint for *_, checkpoint in sorted(found)]


def round_cap(plan: BranchPlan, reference: dict[str, Any]) -> int | None:
    """The branches' examples the rounds stay within: ``max_examples``, and when the plan's
    values came from the finished study (`study.ext.branch.defaults`), what keeps the whole
    run within its runs of the reference's own examples to the target (known once it ran)."""
    cap = plan.max_examples
    to_target = reference.get("examples_to_target")
    if cap is None or plan.first_examples is None or not to_target:
        return cap
    return min(cap, int(RUNS * ROUNDS_SHARE * to_target) - int(reference.get("examples", 0)))


def more_replicates(
    config: StudyConfig, ledger: BranchLedger, plan: BranchPlan, reference: dict[str, Any]
) -> int:
    """Queue the next round's branches (see the module docstring); how many were queued."""
    if plan.max_replicates <= plan.replicates:
        return 0
    from study.ext.branch.report import branch_frames, cbs_report

    branches, checkpoints, frame_plan, frame_reference = branch_frames(ledger)
    if branches.empty:
        return 0
    report = cbs_report(branches, checkpoints, frame_plan, frame_reference, config)
    todo = unresolved(report.curve, max(plan.batch_sizes), plan.resolve)
    if not todo:
        return 0
    counts = branches.groupby("checkpoint")["replicate"].max().astype(int) + 1
    spent = int((branches["steps"].astype(int) * branches["batch_size"].astype(int)).sum())
    per_replicate = plan.window * len(plan.batch_sizes) * len(plan.factors)
    cap = round_cap(plan, reference)
    rounds: dict[int, range] = {}
    for checkpoint in todo:
        have = int(counts.get(checkpoint, plan.replicates))
        if have >= plan.max_replicates:
            continue
        if cap is not None and spent + per_replicate > cap:
            break
        rounds[checkpoint] = range(have, have + 1)
        spent += per_replicate
    if not rounds:
        return 0
    tasks = branch_tasks(plan, reference, config.settings.seed, replicates=rounds)
    return ledger.enqueue_new(tasks)
