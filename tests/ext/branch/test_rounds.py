"""Which checkpoints get another replicate in `study branch`'s later rounds
(`study.ext.branch.rounds.unresolved`)."""

from __future__ import annotations

import math

import pandas as pd

from study.ext.branch.rounds import unresolved


def curve(*rows: tuple[float, float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"checkpoint": i, "examples": 100 * 2**i, "cbs": mid, "cbs_low": low, "cbs_high": high}
            for i, (mid, low, high) in enumerate(rows)
        ]
    )


def test_wide_intervals_are_unresolved_narrow_and_surely_censored_ones_are_not() -> None:
    table = curve(
        (80.0, 40.0, 160.0),  # x4: at the limit, resolved
        (90.0, 30.0, 400.0),  # x13: unresolved
        (256.0, 256.0, math.inf),  # at least the largest, surely: resolved
        (256.0, 20.0, math.inf),  # "at least the largest" only plausibly: unresolved
        (math.nan, math.nan, math.nan),  # no progress: more replicates cannot help
    )
    assert unresolved(table, largest=256, resolve=4.0) == [3, 1]  # open upwards first
    assert unresolved(table, largest=256, resolve=1.5) == [3, 1, 0]


def test_the_widest_comes_first_and_ties_go_to_the_earlier_checkpoint() -> None:
    table = curve((50.0, 5.0, 500.0), (60.0, 6.0, 600.0), (60.0, 30.0, 240.0)).iloc[::-1]
    assert unresolved(table, largest=512, resolve=2.0) == [0, 1, 2]


def test_rounds_of_derived_plans_stay_within_the_runs_of_the_reference_itself() -> None:
    from study.ext.branch.defaults import ROUNDS_SHARE, RUNS
    from study.ext.branch.plan import BranchPlan
    from study.ext.branch.rounds import round_cap

    plan = BranchPlan(
        16, "default", 0.03, 25000, (3000, 6000, 12000), (16, 128, 1024), 2048, 0.9, "fit",
        "", (1.0,), 2, max_replicates=4, max_examples=45000, first_examples=22640,
    )  # fmt: skip
    reference = {"examples": 25000, "examples_to_target": 19000}
    assert round_cap(plan, reference) == int(RUNS * ROUNDS_SHARE * 19000) - 25000
    assert round_cap(plan, {**reference, "examples_to_target": 30000}) == 45000
    assert round_cap(plan, {**reference, "examples_to_target": None}) == 45000
    given = BranchPlan(**{**plan.to_dict(), "first_examples": None})
    assert round_cap(given, reference) == 45000  # a section's own cap is the user's
