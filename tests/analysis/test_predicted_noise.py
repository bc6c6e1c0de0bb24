"""The predicted B_simple (from a pilot run or from the trials) and its comparison with the
fitted B_noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis.noise_scale import NoiseScaleFit
from study.analysis.predicted_noise import (
    B_SIMPLE,
    B_SIMPLE_HIGH,
    B_SIMPLE_LOW,
    PILOT,
    TRIALS,
    compare,
    pilot_prediction,
    predict_noise_scale,
    trials_prediction,
)
from study.config.target import Target
from tests.analysis.conftest import build_table

TARGET = Target.parse("val_accuracy>=0.6")
PILOT_RUN = {
    "batch_size": 32,
    "strategy": "default",
    "learning_rate": 0.03,
    "seed": 0,
    "steps_run": 400,
    "target": "val_accuracy>=0.6",
    "at_step": 380,
    "b_simple": 120.0,
    "b_simple_low": 100.0,
    "b_simple_high": 150.0,
    "curve": [[100, 40.0, 30.0, 55.0], [380, 120.0, 100.0, 150.0]],
}


def noisy_trial(batch_size: int, trial: int, lr: float, accuracy: list[float], b: list[float]):
    """A trial evaluated at steps 0, 10, 20, ... with B_simple ``b`` per evaluation."""
    steps = [10 * i for i in range(len(accuracy))]
    rows = build_table(
        [
            {
                "batch_size": batch_size,
                "trial": trial,
                "learning_rate": lr,
                "steps": steps,
                "accuracy": accuracy,
            }
        ]
    )
    values = np.asarray(b, dtype=float)
    return rows.assign(
        **{B_SIMPLE: values, B_SIMPLE_LOW: 0.8 * values, B_SIMPLE_HIGH: 1.25 * values}
    )


def fit(b_noise: float, ci: tuple[float, float] | None) -> NoiseScaleFit:
    return NoiseScaleFit(ok=True, s_min=100.0, b_noise=b_noise, b_noise_ci=ci)


def test_the_pilot_gives_its_estimate_and_interval() -> None:
    predicted = pilot_prediction(PILOT_RUN)

    assert predicted.ok and predicted.source == PILOT
    assert predicted.b_simple == 120.0 and predicted.interval == (100.0, 150.0)
    assert predicted.steps_run == 400 and predicted.target == "val_accuracy>=0.6"
    row = predicted.estimates.iloc[0]
    assert (row["batch_size"], row["strategy"], row["step"]) == (32, "default", 380)


def test_a_pilot_without_a_finite_estimate_is_no_prediction() -> None:
    for bad in (None, math.nan, -3.0, "x"):
        predicted = pilot_prediction({**PILOT_RUN, "b_simple": bad})
        assert not predicted.ok and "no finite B_simple" in predicted.reason


def test_each_trial_counts_its_estimate_where_it_first_met_the_target() -> None:
    table = noisy_trial(64, 0, 0.1, [0.1, 0.3, 0.65, 0.8], [np.nan, 50.0, 80.0, 200.0])

    predicted = trials_prediction(table, TARGET)

    assert predicted.ok and predicted.source == TRIALS
    assert predicted.b_simple == 80.0  # at step 20, where 0.65 >= 0.6; not 200 at the end
    assert predicted.interval == pytest.approx((64.0, 100.0))
    assert predicted.estimates.iloc[0]["at_target"]


def test_a_trial_that_never_met_the_target_counts_its_last_estimate() -> None:
    table = noisy_trial(64, 0, 0.1, [0.1, 0.3, 0.5], [40.0, 60.0, np.nan])

    predicted = trials_prediction(table, TARGET)

    assert predicted.b_simple == 60.0 and not predicted.estimates.iloc[0]["at_target"]


def test_the_best_trial_of_each_batch_size_counts_and_the_median_combines_them() -> None:
    table = pd.concat(
        [
            noisy_trial(32, 0, 0.01, [0.1, 0.3, 0.5, 0.7], [1, 2, 3, 999.0]),  # slower: 30 steps
            noisy_trial(32, 1, 0.03, [0.1, 0.7, 0.8], [1.0, 90.0, 95.0]),  # best: 10 steps
            noisy_trial(128, 2, 0.1, [0.1, 0.7], [1.0, 110.0]),
            noisy_trial(512, 3, 0.3, [0.1, 0.7], [1.0, 400.0]),
        ]
    )

    predicted = trials_prediction(table, TARGET)

    assert list(predicted.estimates["batch_size"]) == [32, 128, 512]
    assert list(predicted.estimates["trial"]) == [1, 2, 3]
    assert predicted.b_simple == 110.0  # median of 90, 110 and 400
    assert predicted.interval == pytest.approx((0.8 * 90.0, 1.25 * 400.0))
    assert predicted.batch_sizes == 3


def test_no_noise_column_or_no_finite_value_is_no_prediction() -> None:
    plain = build_table(
        [{"batch_size": 8, "trial": 0, "learning_rate": 0.1, "steps": [0, 10], "accuracy": [0, 1]}]
    )
    assert not trials_prediction(plain, TARGET).ok
    empty = plain.assign(**{B_SIMPLE: np.nan})
    assert "finite" in trials_prediction(empty, TARGET).reason


def test_the_pilot_comes_first_then_the_trials() -> None:
    table = noisy_trial(64, 0, 0.1, [0.1, 0.7], [1.0, 80.0])

    assert predict_noise_scale(PILOT_RUN, table, TARGET).source == PILOT
    assert predict_noise_scale(None, table, TARGET).source == TRIALS
    assert predict_noise_scale({"b_simple": None}, table, TARGET).source == TRIALS


def test_overlapping_intervals_agree() -> None:
    agreement = compare(pilot_prediction(PILOT_RUN), fit(140.0, (130.0, 400.0)))

    assert agreement.ok and agreement.agree and agreement.gap == 1.0
    assert agreement.ratio == pytest.approx(140.0 / 120.0) and agreement.within_order


def test_separate_intervals_disagree_by_the_gap_between_their_nearest_ends() -> None:
    high = compare(pilot_prediction(PILOT_RUN), fit(600.0, (300.0, 900.0)))
    low = compare(pilot_prediction(PILOT_RUN), fit(10.0, (5.0, 11.0)))

    assert not high.agree and high.gap == pytest.approx(300.0 / 150.0)
    assert high.ratio == pytest.approx(5.0) and high.within_order
    assert not low.agree and low.gap == pytest.approx(100.0 / 11.0)
    assert not low.within_order  # 120 / 10 = 12 > an order of magnitude


def test_a_missing_interval_counts_as_its_point() -> None:
    inside = compare(pilot_prediction(PILOT_RUN), fit(140.0, None))
    outside = compare(pilot_prediction(PILOT_RUN), fit(160.0, None))

    assert inside.agree and not outside.agree
    assert outside.gap == pytest.approx(160.0 / 150.0)


def test_nothing_to_compare_says_which_side_is_missing() -> None:
    missing = compare(trials_prediction(pd.DataFrame(), TARGET), fit(100.0, None))
    unfitted = compare(pilot_prediction(PILOT_RUN), NoiseScaleFit(ok=False, reason="thin"))

    assert not missing.ok and missing.reason.startswith("no predicted B_simple")
    assert not unfitted.ok and unfitted.reason == "no fitted B_noise: thin"


def test_a_lower_end_without_an_upper_one_is_unbounded_above() -> None:
    table = noisy_trial(64, 0, 0.1, [0.1, 0.7], [1.0, 80.0]).assign(**{B_SIMPLE_HIGH: np.nan})
    pilot = pilot_prediction({**PILOT_RUN, "b_simple_high": None})

    assert trials_prediction(table, TARGET).interval == (64.0, math.inf)
    assert pilot.interval == (100.0, math.inf)
    assert compare(pilot, fit(5000.0, (4000.0, 6000.0))).agree  # no upper end to miss it
    no_interval = pilot_prediction({**PILOT_RUN, "b_simple_low": None, "b_simple_high": None})
    assert no_interval.interval is None
