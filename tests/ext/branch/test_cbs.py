"""CBS(t) from branch trials (`study.ext.branch.cbs`): the rule, its interval, the trend, the
schedule and the cost, on synthetic branches whose critical batch size is known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.ext.branch.cbs import (
    cbs_at,
    cbs_cost,
    cbs_curve,
    cbs_schedule,
    cbs_trend,
    reference_progress,
)

B0 = 16
SIZES = (16, 32, 64, 128, 256, 512)
TOL = 0.02


def branches(
    truth: dict[int, float], *, sd: float = 0.0, replicates: int = 3, seed: int = 0
) -> pd.DataFrame:
    """Branches whose relative loss excess is tol x (1 + log2(B / CBS)) above CBS / 2 (so the
    margin to the tolerance is linear in log B and crosses zero at CBS exactly), plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for ckpt, cbs in truth.items():
        base = 2.0 / (1 + ckpt)
        for b in SIZES:
            excess = 0.0 if b == B0 else max(0.0, TOL * (1 + math.log2(b / cbs)))
            for r in range(replicates):
                loss = base * (1 + excess) * (1 + sd * rng.standard_normal())
                rows.append(
                    {
                        "checkpoint": ckpt,
                        "examples": 1000 * 2**ckpt,
                        "batch_size": b,
                        "replicate": r,
                        "lr_factor": 1.0,
                        "learning_rate": 0.1,
                        "val_loss": loss,
                        "metric": 0.5,
                        "steps": 2048 // b,
                    }
                )
    return pd.DataFrame(rows)


def references(truth: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "checkpoint": list(truth),
            "examples": [1000 * 2**c for c in truth],
            "b_simple": [c * 10.0 for c in truth],
        }
    )


def test_noiseless_branches_give_the_critical_batch_size_exactly() -> None:
    truth = {0: 40.0, 1: 90.0, 2: 200.0}
    found = cbs_curve(branches(truth), references(truth), b0=B0, tolerance=TOL)
    assert found["cbs"].to_numpy() == pytest.approx(list(truth.values()), rel=1e-9)
    # no spread between replicates: the interval is the estimate itself
    assert found["cbs_low"].to_numpy() == pytest.approx(found["cbs"].to_numpy())
    assert found["cbs_high"].to_numpy() == pytest.approx(found["cbs"].to_numpy())
    assert found["b_simple"].tolist() == [0.0, 10.0, 20.0]
    assert not found["censored"].any()


def test_every_batch_size_within_tolerance_is_censored_at_the_largest() -> None:
    found = cbs_at(branches({0: 5000.0}), B0, tolerance=TOL)
    assert found["censored"] and found["cbs"] == 512.0 and found["cbs_high"] == math.inf


def test_the_first_doubling_already_outside_interpolates_from_b0() -> None:
    found = cbs_at(branches({0: 8.0}), B0, tolerance=TOL)
    # batch 32's excess is 3 tolerances (margin -2), B0's margin 1: a third of the way in log B
    assert found["cbs"] == pytest.approx(B0 * 2 ** (1 / 3), rel=1e-9)


def test_interval_covers_the_truth_under_branch_noise() -> None:
    covered, inside_width, spread = 0, [], []
    for seed in range(40):
        found = cbs_at(branches({0: 100.0}, sd=0.004, replicates=3, seed=seed), B0, tolerance=TOL)
        covered += found["cbs_low"] <= 100.0 <= found["cbs_high"]
        inside_width.append(found["cbs_high"] / found["cbs_low"])
        assert found["cbs_low"] <= found["cbs"] <= found["cbs_high"]
        spread.append(found["noise_sd"])
    # replicates are differenced against B0's (paired): the spread of a difference of two
    assert np.median(spread) == pytest.approx(0.004 * math.sqrt(2), rel=0.3)
    assert covered >= 32  # a 90% interval: at least 80% of 40 draws
    assert np.median(inside_width) < 4


def test_more_noise_widens_the_interval() -> None:
    quiet = cbs_at(branches({0: 100.0}, sd=0.002, seed=1), B0, tolerance=TOL)
    loud = cbs_at(branches({0: 100.0}, sd=0.01, seed=1), B0, tolerance=TOL)
    assert loud["cbs_high"] / loud["cbs_low"] > quiet["cbs_high"] / quiet["cbs_low"]


def test_a_metric_tolerance_can_bind_before_the_loss() -> None:
    rows = branches({0: 1000.0})
    rows.loc[rows["batch_size"] >= 128, "metric"] = 0.45  # 0.05 worse from 128 on
    loss_only = cbs_at(rows, B0, tolerance=TOL)
    both = cbs_at(rows, B0, tolerance=TOL, metric_tolerance=0.01)
    assert loss_only["cbs"] == 512.0
    assert 64 <= both["cbs"] < 128
    lower_better = cbs_at(rows, B0, tolerance=TOL, metric_tolerance=0.01, higher_is_better=False)
    assert lower_better["cbs"] == 512.0  # a lower metric is better there: no shortfall


def test_a_rate_search_keeps_each_replicates_best_rate() -> None:
    rows = branches({0: 100.0})
    worse = rows.assign(lr_factor=2.0, val_loss=rows["val_loss"] * 1.5)
    both = pd.concat([rows, worse])
    assert cbs_at(both, B0, tolerance=TOL)["cbs"] == pytest.approx(100.0)


def test_trend_rises_and_no_drop() -> None:
    truth = {0: 20.0, 1: 60.0, 2: 200.0}
    curve = cbs_curve(branches(truth, sd=0.002), references(truth), b0=B0, tolerance=TOL)
    trend = cbs_trend(curve)
    assert trend.rises and trend.no_drop and trend.factor > 3
    falling = cbs_curve(branches({0: 200.0, 1: 20.0}), references(truth), b0=B0, tolerance=TOL)
    assert not cbs_trend(falling).rises and not cbs_trend(falling).no_drop


def test_schedule_rounds_down_to_the_grid_and_never_falls() -> None:
    curve = pd.DataFrame({"examples": [1000, 4000, 16000, 64000], "cbs": [40.0, 150.0, 90.0, 600]})
    schedule = cbs_schedule(
        curve, b0=16, grid=[16, 32, 64, 128, 256], learning_rate=0.01, alpha=0.5
    )
    assert [(s.from_examples, s.batch_size) for s in schedule.stages] == [
        (0, 16),
        (1000, 32),
        (4000, 128),
        (64000, 256),
    ]
    assert schedule.learning_rate_for(64) == pytest.approx(0.02)
    assert "batch_schedule:" in schedule.snippet()


def test_cost_counts_branches_reference_and_study() -> None:
    rows = branches({0: 100.0}, replicates=2)
    reference = {"steps": 1000, "examples": 16000, "examples_to_target": 8000}
    study = pd.DataFrame({"steps_run": [500, 700], "examples_run": [8000, 22400]})
    cost = cbs_cost(rows, reference, study)
    assert cost.branch_examples == 6 * 2 * 2048  # each branch trains 2,048 examples
    assert cost.branch_steps == 2 * sum(2048 // b for b in SIZES)
    assert cost.examples == 16000 + 6 * 2 * 2048
    assert cost.reference_runs == pytest.approx(cost.examples / 8000)
    assert cost.of_study == pytest.approx(cost.examples / 30400)
    assert cbs_cost(rows, {"steps": 1, "examples": 16}).reference_runs is None


def test_a_progress_tolerance_is_a_share_of_the_b0_branchs_progress() -> None:
    # from a checkpoint at loss 1.0 the B0 branch gets to 0.8; batch B loses (B/B_noise) of
    # that progress's share 1 / (1 + B/B_noise) (McCandlish et al.): half of it at B_noise
    b_noise = 100.0
    rows = []
    for b in SIZES:
        share = (1 + B0 / b_noise) / (1 + b / b_noise)  # relative to B0's own progress
        for r in range(2):
            rows.append({"checkpoint": 0, "examples": 1000, "batch_size": b, "replicate": r,
                         "lr_factor": 1.0, "val_loss": 1.0 - 0.2 * share, "metric": 0.5})  # fmt: skip
    found = cbs_at(pd.DataFrame(rows), B0, tolerance=0.5, start_loss=1.0)
    assert 64 < found["cbs"] < 256  # the crossing at B_noise + 2 B0 = 132, read between grid points
    refs = pd.DataFrame({"checkpoint": [0], "examples": [1000], "val_loss": [1.0]})
    curve = cbs_curve(pd.DataFrame(rows), refs, b0=B0, tolerance=0.5, basis="progress")
    assert curve["cbs"].iloc[0] == pytest.approx(found["cbs"])
    assert curve["checkpoint_loss"].iloc[0] == 1.0
    stuck = pd.DataFrame(rows).assign(val_loss=1.0)
    assert math.isnan(cbs_at(stuck, B0, tolerance=0.5, start_loss=1.0)["cbs"])


def test_paired_replicates_cancel_noise_the_batch_sizes_share() -> None:
    rows = branches({0: 100.0}, replicates=4)
    shared = {r: 1 + 0.05 * (r - 1.5) for r in range(4)}  # one replicate's examples, all sizes
    rows["val_loss"] *= rows["replicate"].map(shared)
    found = cbs_at(rows, B0, tolerance=TOL)
    assert found["cbs"] == pytest.approx(100.0, rel=0.05)
    assert found["cbs_high"] / found["cbs_low"] < 1.3  # the shared part cancels in the pairs
    unpaired = cbs_at(rows[rows["replicate"] != 3].iloc[:-1], B0, tolerance=TOL)
    assert unpaired["cbs_high"] / unpaired["cbs_low"] > found["cbs_high"] / found["cbs_low"]


def test_the_references_progress_reads_the_trend_through_jitter() -> None:
    """A loss falling as 3 - 0.4 log(examples), evaluated on a 1.05 grid with jitter of 0.03:
    over 40 draws, the line through the evaluations reads the progress over a window at least
    twice as closely as the difference of the two evaluations at its ends."""
    examples = np.unique(np.round(200 * 1.05 ** np.arange(80)))
    starts, window = [1000, 8000], 768
    truth = np.array([0.4 * math.log((t + window) / t) for t in starts])
    fitted, ends = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        loss = 3 - 0.4 * np.log(examples) + 0.03 * rng.standard_normal(len(examples))
        curve = pd.DataFrame({"examples": examples, "val_loss": loss})
        fitted.append(np.array(reference_progress(curve, starts, window)) - truth)
        at = [np.searchsorted(examples, e) for t in starts for e in (t, t + window)]
        ends.append(np.array([loss[at[0]] - loss[at[1]], loss[at[2]] - loss[at[3]]]) - truth)
    rms = float(np.sqrt(np.mean(np.square(fitted))))
    assert rms < 0.02 and rms < 0.5 * float(np.sqrt(np.mean(np.square(ends))))
    assert abs(float(np.mean(fitted))) < 0.01  # no bias on a straight trend
    few = pd.DataFrame({"examples": examples[:2], "val_loss": [2.0, 1.9]})
    assert math.isnan(reference_progress(few, [1000], window)[0])  # too few points


def test_a_progress_given_replaces_the_single_evaluations_difference() -> None:
    rows = branches({0: 64.0})
    l0 = float(rows.loc[rows["batch_size"] == B0, "val_loss"].mean())
    # the checkpoint's own evaluation says "no progress" (it jittered low), the trend says 2 * l0
    nothing = cbs_at(rows, B0, tolerance=TOL, start_loss=l0 - 0.01)
    assert math.isnan(nothing["cbs"])
    trend = cbs_at(rows, B0, tolerance=TOL, start_loss=l0 - 0.01, progress=l0)
    assert trend["cbs"] == pytest.approx(64.0, rel=0.02)  # the excess is tol x l0 at 64


def test_the_trend_leaves_out_checkpoints_without_a_cbs() -> None:
    curve = pd.DataFrame(
        {
            "examples": [100, 200, 400, 800],
            "cbs": [20.0, math.nan, 60.0, 256.0],
            "cbs_low": [18.0, math.nan, 40.0, 256.0],
            "cbs_high": [25.0, math.nan, 90.0, math.inf],
        }
    )
    trend = cbs_trend(curve)
    assert trend.rises and trend.no_drop and trend.factor == pytest.approx(12.8)
    none = curve.assign(cbs=math.nan)
    assert cbs_trend(none).rises is False
