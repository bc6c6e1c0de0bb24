"""model_free_readings and pooled_steps: what the measured steps say without a model."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from study.analysis.answers import overhead_batch_size
from study.analysis.model_free import model_free_readings, pooled_steps
from study.analysis.regimes import scaling_regimes

POWERS = 2.0 ** np.arange(0, 15)  # 1 ... 16384: B_0 = 1 far below every B_noise used


def knee_steps(b_noise: float, q: float, s_min: float = 1000.0) -> pd.DataFrame:
    """``S = S_min (1 + (B_noise / B)^q)^(1/q)`` on `POWERS`."""
    steps = s_min * (1.0 + (b_noise / POWERS) ** q) ** (1.0 / q)
    return pd.DataFrame({"batch_size": POWERS, "steps_to_result": steps})


def test_perfect_scaling_has_no_overhead_point():
    readings = model_free_readings(
        pd.DataFrame({"batch_size": POWERS, "steps_to_result": 1e6 / POWERS})
    )
    assert readings.ok
    assert readings.ratios == pytest.approx([1.0] * POWERS.size)
    assert readings.beyond and math.isinf(readings.critical)
    assert readings.bracket == (POWERS[-1], math.inf)
    assert readings.perfect_end == POWERS[-1] and math.isinf(readings.max_parallel_start)
    assert "overhead beyond 16384" in readings.text()
    assert json.loads(json.dumps(readings.to_dict()))["critical"] is None


@pytest.mark.parametrize(
    ("q", "early", "late"),
    # Linear interpolation over one doubling of a convex log-log curve: the chord lies above
    # the curve, so the reading comes early, by up to ~4% for McCandlish's soft knee and ~11%
    # for a sharp one (q = 3.8: the whole 20% rises within about one doubling). Relative to
    # E(B_0) = E_min (1 + B_0/B_noise) rather than E_min, the point moves late by about
    # 6 B_0 / B_noise for q = 1 (under 1.2% here) and by nothing measurable for q = 3.8.
    [(1.0, 0.05, 0.015), (3.8, 0.12, 0.005)],
)
def test_the_overhead_point_of_a_knee_curve(q, early, late):
    for b_noise in np.geomspace(512, 1024, 9)[:-1] * 1.01:  # one octave of offsets
        readings = model_free_readings(knee_steps(b_noise, q))
        truth = float(overhead_batch_size(b_noise, q, 0.2))
        assert 1.0 - early <= readings.critical / truth <= 1.0 + late
        low, high = readings.bracket
        assert high == 2 * low  # two adjacent measured sizes
        assert low <= readings.critical <= high
        assert low <= truth <= high
        i = readings.batch_sizes.index(high)
        assert readings.ratios[i - 1] <= 1.2 < readings.ratios[i]


def test_the_overhead_point_is_first_exceeded_and_interpolated_in_log_log():
    steps = pd.DataFrame(
        {"batch_size": [16, 32, 64, 128, 256], "steps_to_result": [1000, 600, 250, 150, 120]}
    )
    readings = model_free_readings(steps)
    # Ratios 1, 1.2, 1, 1.2, 1.92: 1.2 is not above 1.2, so 256 is the first that exceeds.
    assert readings.ratios == pytest.approx([1.0, 1.2, 1.0, 1.2, 1.92])
    assert readings.bracket == (128, 256)
    assert readings.critical == pytest.approx(128.0)
    steps["steps_to_result"] = [1000, 600, 250, 125, 90]  # ratios 1 at 128, 1.44 at 256
    # 1.2 is halfway from 1 to 1.44 in log: the point is halfway from 128 to 256 in log.
    assert model_free_readings(steps).critical == pytest.approx(128 * math.sqrt(2))
    wider = model_free_readings(steps, overhead=0.5)
    assert wider.beyond and wider.bracket == (256, math.inf)


def test_the_regimes_are_those_of_scaling_regimes():
    sizes = 2 ** np.arange(3, 13)
    steps = [12800 / b if b <= 128 else 100 * 0.75 ** min(math.log2(b / 128), 3.0) for b in sizes]
    table = pd.DataFrame({"batch_size": sizes, "steps_to_result": steps})
    readings = model_free_readings(table)
    regimes = scaling_regimes(table)
    assert (readings.perfect_end, readings.max_parallel_start) == (128, 1024)
    assert (readings.perfect_end, readings.max_parallel_start) == (
        regimes.perfect_end,
        regimes.max_parallel_start,
    )
    assert readings.text() == "20% overhead at 175 (128-256); perfect to 128; maximal from 1024"


def test_thin_data_and_unreached_batch_sizes():
    thin = model_free_readings(
        pd.DataFrame({"batch_size": [16, 32], "steps_to_result": [100.0, math.inf]})
    )
    assert not thin.ok and "fewer than 2" in thin.reason and thin.excluded == (32,)
    assert thin.text().startswith("no model-free reading")
    readings = model_free_readings(
        pd.DataFrame({"batch_size": [8, 16, 32], "steps_to_result": [math.inf, 100.0, 70.0]})
    )
    assert readings.ok and readings.excluded == (8,) and readings.batch_sizes == (16, 32)
    assert readings.ratios == pytest.approx([1.0, 1.4])
    with pytest.raises(ValueError, match="overhead must be > 0"):
        model_free_readings(thin_table(), overhead=0.0)


def thin_table() -> pd.DataFrame:
    return pd.DataFrame({"batch_size": [16, 32], "steps_to_result": [100.0, 50.0]})


def trial(batch: int, rate: float, seed: int | None, steps: float) -> dict[str, object]:
    return {"batch_size": batch, "learning_rate": rate, "seed": seed, "steps_to_target": steps}


def test_pooling_takes_the_median_over_seeds_with_a_failed_seed_as_infinite():
    trials = pd.DataFrame(
        [
            # batch 16: rate 0.1 at 100, 120, never -> 120; rate 0.2 at 90, 200, 210 -> 200
            *(trial(16, 0.1, s, v) for s, v in enumerate([100, 120, math.nan])),
            *(trial(16, 0.2, s, v) for s, v in enumerate([90, 200, 210])),
            # batch 32: rate 0.1 at 50, never, never -> inf; rate 0.3 at 70, 80, 60 -> 70
            *(trial(32, 0.1, s, v) for s, v in enumerate([50, math.inf, math.nan])),
            *(trial(32, 0.3, s, v) for s, v in enumerate([70, 80, 60])),
            # batch 64: nothing reached under two seeds of its one point
            *(trial(64, 0.1, s, v) for s, v in enumerate([40, math.inf, math.inf])),
        ]
    )
    pooled = pooled_steps(trials)
    assert pooled["batch_size"].tolist() == [16, 32, 64]
    assert pooled["steps_to_result"].tolist() == [120, 70, math.inf]
    assert pooled["best_learning_rate"].iloc[:2].tolist() == [0.1, 0.3]
    assert math.isnan(pooled["best_learning_rate"].iloc[2])
    assert pooled[["steps_low", "steps_high"]].iloc[0].tolist() == [100, math.inf]
    assert pooled["seeds"].tolist() == [3, 3, 3]


def test_pooling_a_single_seed_table_is_the_best_trial_per_batch_size():
    trials = pd.DataFrame(
        [trial(16, 0.1, None, 100), trial(16, 0.2, None, 80), trial(32, 0.2, None, math.nan)]
    ).drop(columns="seed")
    pooled = pooled_steps(trials)
    assert pooled["steps_to_result"].tolist() == [80, math.inf]
    assert pooled["seeds"].tolist() == [1, 1]
    readings = model_free_readings(pooled)
    assert not readings.ok and readings.excluded == (32,)
