"""trial_crossings and crossing_estimate: where a trial's crossing lies on its evaluation grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.analysis import PREVIOUS_STEP, trial_crossings, trial_steps_to_target
from study.analysis.crossings import crossing_estimate
from study.config.target import Target

TARGET = Target.parse("val_accuracy>=0.6")


def test_previous_step_is_the_evaluation_before_the_first_hit(make_table):
    df = make_table(
        [
            {"batch_size": 8, "trial": 0, "learning_rate": 0.1, "steps": [0, 10, 20, 30],
             "accuracy": [0.1, 0.5, 0.7, 0.8]},
            {"batch_size": 8, "trial": 1, "learning_rate": 0.3, "steps": [0, 10, 20],
             "accuracy": [0.1, 0.2, 0.3], "state": "not_reached"},
            {"batch_size": 16, "trial": 2, "learning_rate": 0.1, "steps": [0, 5],
             "accuracy": [0.1, 0.9]},
        ]
    )  # fmt: skip

    out = trial_crossings(df, TARGET).set_index("trial")

    assert out.loc[0, "steps_to_target"] == 20 and out.loc[0, PREVIOUS_STEP] == 10
    assert math.isinf(out.loc[1, "steps_to_target"]) and math.isnan(out.loc[1, PREVIOUS_STEP])
    assert out.loc[2, PREVIOUS_STEP] == 0
    plain = trial_steps_to_target(df, TARGET).set_index("trial")
    assert list(out.drop(columns=PREVIOUS_STEP).columns) == list(plain.columns)


def test_crossing_estimate_is_the_geometric_midpoint_of_the_bracket():
    steps = np.array([44.0, 5.0, 1.0, math.inf, 30.0])
    previous = np.array([41.0, 0.0, 0.0, math.nan, math.nan])

    estimate = crossing_estimate(steps, previous)

    assert estimate == pytest.approx([math.sqrt(41 * 44), 5.0, 1.0, math.inf, 30.0])
    assert np.array_equal(crossing_estimate(steps, None), steps)  # no brackets: first hits
