"""Point estimates inside their intervals, on the example study and a quickstart-like one.

Issue 12: a bootstrap that resampled trials and took the best again gave intervals with the
estimate on their edge (B_noise 433 (290 to 433), S_min 20.9 (20.9 to 31.5) on the quickstart).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sim.simulate import TARGET, StudyDesign, StudyTruth, simulate_table

from study.analysis import (
    fit_lr_power_law,
    fit_noise_scale_from_trials,
    recommend,
    summarize_trials,
    trial_crossings,
)
from study.config.target import Target

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist1d_mlp" / "measurements.csv"
QUICKSTART = StudyDesign(batch_sizes=(8, 32, 128, 512), trials_per_batch=6, eval_ratio=1.1)


def _strictly_inside(estimate: float, ci: tuple[float, float] | None) -> None:
    assert ci is not None
    low, high = ci
    # Room on both sides: at least 1% of the estimate, so neither end is the estimate itself.
    assert low < 0.99 * estimate and 1.01 * estimate < high, (low, estimate, high)


def _check(table: pd.DataFrame, target: Target) -> None:
    trials = trial_crossings(table, target)
    fit = fit_noise_scale_from_trials(trials)
    steps = summarize_trials(trials)
    rec = recommend(steps, fit, None, 8)
    rates = steps[np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float))]
    lr = fit_lr_power_law(rates["batch_size"], rates["best_learning_rate"])

    assert fit.ok and rec.ok and lr.ok
    _strictly_inside(fit.b_noise, fit.b_noise_ci)
    _strictly_inside(fit.s_min, fit.s_min_ci)
    _strictly_inside(fit.e_min, fit.e_min_ci)
    _strictly_inside(rec.step_speedup, rec.step_speedup_ci)
    _strictly_inside(rec.time_speedup, rec.time_speedup_ci)
    assert lr.alpha_ci[0] < lr.alpha < lr.alpha_ci[1]


def test_example_study_estimates_lie_inside_their_intervals():
    table = pd.read_csv(EXAMPLE)

    _check(table, Target.parse("val_accuracy>=0.6"))

    fit = fit_noise_scale_from_trials(trial_crossings(table, Target.parse("val_accuracy>=0.6")))
    assert fit.b_noise == pytest.approx(324, rel=0.01)
    assert fit.b_noise_ci == pytest.approx((144, 762), rel=0.01)


@pytest.mark.parametrize("seed", range(5))
def test_quickstart_like_estimates_lie_inside_their_intervals(seed):
    truth = StudyTruth(s_min=25.0, b_noise=300.0, alpha=0.7, lr_scale=0.02)

    table = simulate_table(truth, QUICKSTART, np.random.default_rng(seed))

    _check(table, Target.parse(TARGET))
