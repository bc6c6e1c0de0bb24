"""The simulator's quickstart-size design: a step budget fixed by the smallest batch size, the
runner's fine evaluation, pruning against each batch size's best so far, a drawn knee."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from sim.simulate import (
    QUICKSTART,
    TARGET,
    StudyDesign,
    StudyTruth,
    draw_truth,
    simulate_table,
    simulate_trials,
)

from study.analysis import trial_crossings
from study.config.target import Target

#: The quickstart's design at one truth (no drawn B_noise or knee, the default rate guess).
DESIGN = dataclasses.replace(
    QUICKSTART,
    lr_centre_error=StudyDesign.lr_centre_error,
    b_noise_range=None,
    knee_range=None,
)
TRUTH = StudyTruth(s_min=30.0, b_noise=300.0, alpha=0.9, lr_scale=0.02)


def test_a_pruned_trial_stops_where_an_earlier_one_of_its_batch_size_reached_the_target():
    trials = pd.concat(
        [simulate_trials(TRUTH, DESIGN, np.random.default_rng(seed)) for seed in range(20)]
    )
    assert {"reached", "pruned"} <= set(trials["state"])
    assert 0.3 < np.mean(trials["state"] == "pruned") < 0.7  # as the quickstart's 13 of 24

    slack = DESIGN.prune_slack
    for seed in range(20):
        study = simulate_trials(TRUTH, DESIGN, np.random.default_rng(seed))
        for _, batch in study.groupby("batch_size", sort=False):
            best = math.inf
            for row in batch.itertuples():
                if row.state == "pruned":
                    budget = DESIGN.budget_steps(TRUTH, row.batch_size)
                    assert row.last_step == min(math.ceil(slack * best), budget)  # every step
                    assert row.crossing > row.last_step
                elif row.state == "reached":
                    assert row.steps_to_target <= slack * best  # near the best (or the first)
                    best = min(best, row.steps_to_target)
                elif row.state == "not_reached":
                    assert math.isinf(best)  # nothing to prune against yet


def test_fine_evaluation_reads_the_crossing_to_the_step_within_one_budget():
    study = simulate_trials(TRUTH, DESIGN, np.random.default_rng(1))
    reached = study[study["reached"]]
    assert np.all(reached["steps_to_target"] == np.ceil(reached["crossing"]))
    assert np.all(reached["previous_step"] == reached["steps_to_target"] - 1)
    budget = math.ceil(1.6 * float(TRUTH.steps(8)))
    assert DESIGN.budget_steps(TRUTH, 512) == DESIGN.budget_steps(TRUTH, 8) == budget
    assert study["last_step"].max() <= budget


def test_the_measurement_table_gives_back_pruned_trials():
    design = StudyDesign(batch_sizes=(8, 32, 128), trials_per_batch=5, eval_ratio=1.1, pruning=True)
    trials = simulate_trials(TRUTH, design, np.random.default_rng(3))
    table = simulate_table(TRUTH, design, np.random.default_rng(3))

    measured = trial_crossings(table, Target.parse(TARGET))
    columns = ["batch_size", "trial", "state", "steps_to_target"]
    pd.testing.assert_frame_equal(
        measured[columns].reset_index(drop=True), trials[columns], check_dtype=False
    )
    pruned = trials[trials["state"] == "pruned"]
    assert len(pruned) and np.all(
        table.groupby("trial")["step"].max()[pruned["trial"]].to_numpy() == pruned["last_step"]
    )


def test_pruning_slack_stops_trials_later_and_lets_more_reach():
    truth = StudyTruth(50.0, 450.0, 0.8, 0.003, 3.8)
    strict = StudyDesign(batch_sizes=(256, 512, 1024), trials_per_batch=8, pruning=True)
    loose = dataclasses.replace(strict, prune_slack=1.5)
    a = simulate_trials(truth, strict, np.random.default_rng(5))
    b = simulate_trials(truth, loose, np.random.default_rng(5))  # the same trials' crossings
    assert b["reached"].sum() > a["reached"].sum()
    assert (b["last_step"] >= a["last_step"]).all()
    for frame, slack in ((a, 1.0), (b, 1.5)):
        for _, group in frame.groupby("batch_size"):
            best = group.loc[group["reached"], "steps_to_target"].min()
            pruned = group[group["state"] == "pruned"]
            assert (pruned["last_step"] >= slack * best).all()  # the best so far >= the last


def test_the_knee_is_drawn_from_its_range():
    design = StudyDesign(batch_sizes=(8, 32, 128, 512), knee_range=(1.0, 4.0))
    rng = np.random.default_rng(0)
    knees = np.array([draw_truth(design, rng).knee for _ in range(400)])
    assert knees.min() >= 1.0 and knees.max() <= 4.0
    assert np.median(knees) == pytest.approx(2.0, rel=0.1)  # log-uniform
    with pytest.raises(ValueError, match="knee_range must be"):
        StudyDesign(knee_range=(0.5, 2.0))
