"""`benchmarks/grid_truth.py`: a dense grid read without the model, its learning-rate jaggedness
smoothed out, on synthetic grids whose steps at the best rate are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from grid_truth import smoothed_grid, truth_readings

SIZES = (16, 32, 64, 128, 256, 512, 1024)
RATES = np.exp(np.linspace(math.log(1e-3), math.log(1.0), 24))


def steps_at_best(batch: float) -> float:
    """Perfect scaling to 128, then flat: S = 40 (1 + 128 / B)."""
    return 40.0 * (1.0 + 128.0 / batch)


def grid(jagged: float, seed: int = 0) -> pd.DataFrame:
    """Every batch size at 24 rates under three seeds: the best rate grows like B, log steps a
    parabola in log rate around it, times independent jagged noise per trial."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in SIZES:
        best = 0.01 * b / 16
        for lr in RATES:
            bowl = 0.3 * math.log(lr / best) ** 2
            for s in range(3):
                steps = steps_at_best(b) * math.exp(bowl + jagged * rng.standard_normal())
                reached = bowl < 2.5
                rows.append(
                    {
                        "batch_size": b,
                        "learning_rate": lr,
                        "seed": s,
                        "steps_to_target": steps if reached else math.inf,
                    }
                )
    return pd.DataFrame(rows)


def test_without_noise_the_smoothed_steps_are_the_bowls_minima() -> None:
    smoothed = smoothed_grid(grid(0.0), draws=10)
    expected = [steps_at_best(b) for b in SIZES]
    np.testing.assert_allclose(smoothed.steps, expected, rtol=0.02)
    assert list(smoothed.batch_sizes) == list(SIZES)


def test_jagged_steps_bias_the_fewest_but_not_the_smoothed_minimum() -> None:
    trials = grid(0.15, seed=1)
    smoothed = smoothed_grid(trials, draws=200)
    truth = np.array([steps_at_best(b) for b in SIZES])
    fewest = trials.groupby(["batch_size", "learning_rate"])["steps_to_target"].median()
    fewest = fewest.groupby(level=0).min().to_numpy()
    assert np.all(fewest < truth)  # the luckiest of 24 medians
    assert np.median(np.abs(np.log(smoothed.steps / truth))) < 0.05
    assert np.mean(np.log(fewest / truth)) < np.mean(np.log(smoothed.steps / truth)) - 0.05


def test_each_reading_has_an_interval_around_its_central_value() -> None:
    answers = truth_readings(smoothed_grid(grid(0.15, seed=2), draws=200))
    assert set(answers) == {"critical_batch", "perfect_end", "max_parallel_start",
                            "recommended_batch"}  # fmt: skip
    for answer in answers.values():
        assert answer.low <= answer.estimate <= answer.high, answer
    # E(B) = 40 (B + 128) is 1.2 E(16) at B = 1.2 * 144 - 128 = 44.8
    critical = answers["critical_batch"]
    assert critical.covers(44.8) and 32 < critical.estimate < 64, critical
    assert critical.high < 128
    assert answers["recommended_batch"].estimate % 8 == 0


def test_a_batch_size_reached_at_too_few_rates_keeps_its_fewest_median() -> None:
    trials = grid(0.0)
    narrow = trials["batch_size"] == 1024
    bowl = np.abs(np.log(trials["learning_rate"] / (0.01 * 1024 / 16)))
    far = narrow & (bowl > 0.35)  # only the two rates nearest its best reach
    trials.loc[far, "steps_to_target"] = math.inf
    smoothed = smoothed_grid(trials, draws=10)
    reached = trials[narrow & np.isfinite(trials["steps_to_target"])]
    assert 1 <= reached["learning_rate"].nunique() < 4
    assert smoothed.steps[-1] == pytest.approx(reached["steps_to_target"].min())
    assert np.all(smoothed.draws[:, -1] == smoothed.steps[-1])
