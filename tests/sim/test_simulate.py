"""The simulator of synthetic studies: its trials, its measurement table and its truth."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sim.simulate import (
    TARGET,
    StudyDesign,
    StudyTruth,
    best_of_n_factor,
    draw_truth,
    evaluation_steps,
    simulate_table,
    simulate_trials,
)

from study.analysis import trial_crossings
from study.config.target import Target
from study.config.trial import EvalCadence

DESIGN = StudyDesign(batch_sizes=(8, 32, 128, 512, 2048), trials_per_batch=6, eval_ratio=1.1)
TRUTH = StudyTruth(s_min=50.0, b_noise=200.0, alpha=0.6, lr_scale=0.003)


def test_evaluation_steps_follow_the_study_cadence():
    steps = evaluation_steps(30, 1.1)

    assert steps.tolist() == [*range(12), 13, 15, 17, 19, 21, 24, 27, 30]
    cadence = EvalCadence(kind="geometric", ratio=1.05)
    grid = evaluation_steps(5000, 1.05)
    inner = grid[:-1]  # the budget's end is evaluated wherever it falls
    assert all(cadence.next_step(int(a)) == b for a, b in itertools.pairwise(inner))
    assert grid[-1] == 5000


def test_the_measurement_table_gives_back_the_trials():
    trials = simulate_trials(TRUTH, DESIGN, np.random.default_rng(3))
    table = simulate_table(TRUTH, DESIGN, np.random.default_rng(3))

    measured = trial_crossings(table, Target.parse(TARGET))

    columns = ["batch_size", "trial", "learning_rate", "state", "steps_to_target",
               "previous_step", "examples_to_target"]  # fmt: skip
    pd.testing.assert_frame_equal(
        measured[columns].reset_index(drop=True), trials[columns], check_dtype=False
    )
    assert set(trials["state"]) <= {"reached", "not_reached", "diverged"}
    reached = trials[trials["reached"]]
    assert np.all(reached["previous_step"] < reached["crossing"])
    assert np.all(reached["crossing"] <= reached["steps_to_target"])


def test_the_best_trials_follow_the_truth():
    design = StudyDesign(
        batch_sizes=DESIGN.batch_sizes, trials_per_batch=200, noise=0.02, eval_ratio=1.01
    )
    trials = simulate_trials(TRUTH, design, np.random.default_rng(0))

    best = trials.groupby("batch_size")["crossing"].min()

    # Each batch size's best is S(B) times one draw of the best-of-N factor.
    log_ratio = np.log(best.to_numpy() / TRUTH.steps(best.index))
    assert np.all(np.abs(log_ratio - math.log(best_of_n_factor(design, draws=5000))) < 0.08)
    best_lr = trials.loc[trials.groupby("batch_size")["crossing"].idxmin(), "learning_rate"]
    slope = np.polyfit(np.log(best.index), np.log(best_lr.to_numpy()), 1)[0]
    assert slope == pytest.approx(TRUTH.alpha, abs=0.05)


def test_best_of_n_factor_follows_the_search():
    one = StudyDesign(trials_per_batch=1, lr_window=0.0, lr_centre_error=0.0, noise=0.1)
    assert best_of_n_factor(one) == pytest.approx(1.0, abs=0.002)
    many = StudyDesign(trials_per_batch=16, lr_window=0.0, lr_centre_error=0.0, noise=0.1)
    assert best_of_n_factor(many) < 0.9  # the luckiest of 16 runs
    coarse = StudyDesign(trials_per_batch=2, lr_window=1.0, noise=0.01)
    assert best_of_n_factor(coarse) > 1.2  # two rates in two decades rarely land near lr*


def test_drawn_truths_put_the_knee_inside_the_batch_sizes():
    rng = np.random.default_rng(0)
    truths = [draw_truth(DESIGN, rng) for _ in range(200)]

    assert all(32 <= t.b_noise <= 512 for t in truths)
    assert all(20 <= t.s_min <= 500 and 0.3 <= t.alpha <= 1 for t in truths)
    assert TRUTH.e_min == 50.0 * 200.0
    assert TRUTH.speedup(8, 200) == pytest.approx((1 + 200 / 8) / 2)


def test_bad_designs_raise():
    with pytest.raises(ValueError, match="trials_per_batch must be >= 1"):
        StudyDesign(trials_per_batch=0)
    with pytest.raises(ValueError, match="at least 2 sizes"):
        StudyDesign(batch_sizes=(8,))
    assert math.isfinite(best_of_n_factor(DESIGN))
