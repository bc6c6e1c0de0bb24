"""Steps to result over seeds: confirmed points count by their median, with its spread, in the
per-batch-size table and in the noise-scale fit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from study.analysis import fit_noise_scale_from_trials, steps_to_result, trial_crossings
from study.analysis.seeds import best_over_seeds, robust_steps, seed_noise
from study.config.target import Target

ACC_60 = Target.parse("val_accuracy>=0.6")


def test_best_over_seeds_prefers_a_steady_point_to_a_lucky_trial():
    estimate = best_over_seeds(
        index=["a0", "b0", "a1", "a2", "b1", "b2"],
        points=["a", "b", "a", "a", "b", "b"],
        seeds=[None, None, 1, 2, 1, 2],
        steps=[100, 120, 140, 150, 125, 118],
        learning_rates=[0.1, 0.2, 0.1, 0.1, 0.2, 0.2],
    )
    assert estimate is not None
    assert (estimate.steps, estimate.low, estimate.high, estimate.seeds) == (120, 118, 125, 3)
    assert estimate.index == "b0"  # the point's trial at the study's seed


def test_without_several_seeds_the_best_single_trial_counts():
    estimate = best_over_seeds(["x", "y"], ["a", "b"], [None, None], [130, 110], [0.1, 0.2])
    assert estimate is not None
    assert (estimate.steps, estimate.seeds, estimate.index) == (110, 1, "y")
    assert best_over_seeds([], [], [], [], []) is None
    # a confirmed point that never reached the target under most seeds has an infinite median
    never = best_over_seeds([0, 1, 2], ["a"] * 3, [None, 1, 2], [90, math.inf, math.inf], [0.1] * 3)
    assert never is not None and never.steps == math.inf


def seeded_table(make_table, confirmed: bool) -> pd.DataFrame:
    """Batch sizes 16..256 with S(B) = 100 (1 + 64 / B) at lr 0.1 (steady) and a lucky lr 0.05
    that reached 30% faster at the study's seed only; with ``confirmed``, both points also ran
    under seeds 1 and 2."""
    specs: list[dict] = []
    seeds: dict[int, float] = {}

    def add(batch: int, lr: float, needed: float, seed: int | None = None) -> None:
        trial = len(specs)
        steps = list(range(0, int(needed * 2) + 1))
        acc = [min(0.8, 0.6 * s / needed) for s in steps]
        specs.append(
            {
                "batch_size": batch,
                "trial": trial,
                "learning_rate": lr,
                "steps": steps,
                "accuracy": acc,
            }
        )
        seeds[trial] = np.nan if seed is None else seed

    for batch in (16, 32, 64, 128, 256):
        s = 100 * (1 + 64 / batch)
        add(batch, 0.1, round(s))
        add(batch, 0.05, round(0.7 * s))
        if confirmed:
            for seed, (steady, lucky) in ((1, (1.05, 1.3)), (2, (0.97, 1.4))):
                add(batch, 0.1, round(steady * s), seed)
                add(batch, 0.05, round(lucky * s), seed)
    table = make_table(specs)
    table["seed"] = table["trial"].map(seeds)
    return table


def test_the_per_batch_size_table_takes_the_median_of_confirmed_points(make_table):
    table = seeded_table(make_table, confirmed=True)
    steps = steps_to_result(table, ACC_60)
    expected = 100 * (1 + 64 / steps["batch_size"])
    assert steps["steps_to_result"].to_numpy() == pytest.approx(expected.round(), abs=1)
    assert (steps["best_learning_rate"] == 0.1).all()
    assert (steps["seeds"] == 3).all()
    assert steps["steps_low"].to_numpy() == pytest.approx((0.97 * expected).round(), abs=1)
    assert steps["steps_high"].to_numpy() == pytest.approx((1.05 * expected).round(), abs=1)
    assert steps["examples_to_result"].to_numpy() == pytest.approx(
        steps["steps_to_result"] * steps["batch_size"]
    )

    plain = steps_to_result(seeded_table(make_table, confirmed=False), ACC_60)
    assert (plain["best_learning_rate"] == 0.05).all()  # the lucky one, unconfirmed
    assert (plain["seeds"] == 1).all()
    assert (plain["steps_low"] == plain["steps_to_result"]).all()


def test_the_noise_scale_fit_uses_the_medians(make_table):
    confirmed = trial_crossings(seeded_table(make_table, confirmed=True), ACC_60)
    fit = fit_noise_scale_from_trials(confirmed, intervals=False)
    assert fit.b_noise == pytest.approx(64, rel=0.05)
    assert fit.s_min == pytest.approx(100, rel=0.05)
    lucky = fit_noise_scale_from_trials(
        trial_crossings(seeded_table(make_table, confirmed=False), ACC_60), intervals=False
    )
    assert lucky.s_min == pytest.approx(70, rel=0.05)  # the unconfirmed lucky trials


def test_robust_steps_groups_by_every_column_asked(make_table):
    table = seeded_table(make_table, confirmed=True)
    trials = trial_crossings(table, ACC_60).assign(strategy="default")
    by_stratum = robust_steps(
        trials, trials["steps_to_target"].to_numpy(float), ["batch_size", "strategy"]
    )
    assert sorted(by_stratum) == [(b, "default") for b in (16, 32, 64, 128, 256)]
    assert {e.seeds for e in by_stratum.values()} == {3}


def _trials(rows: list[tuple[int, float, float | None, float]]) -> pd.DataFrame:
    """Per-trial rows (batch size, learning rate, seed, steps to target; inf: not reached)."""
    return pd.DataFrame(
        [
            {"batch_size": b, "learning_rate": lr, "seed": math.nan if s is None else s,
             "steps_to_target": steps}
            for b, lr, s, steps in rows
        ]
    )  # fmt: skip


def test_seed_noise_pools_the_spread_of_log_steps_within_points() -> None:
    trials = _trials(
        [
            (16, 0.1, 1, 900.0), (16, 0.1, 2, 1100.0),  # one point, two seeds
            (64, 0.2, 1, 300.0), (64, 0.2, 2, 330.0), (64, 0.2, 3, 270.0),
            (64, 0.2, 4, math.inf),  # a seed that never reached: left out, counted
            (64, 0.4, 5, 250.0),  # a point under one seed: no spread of its own
            (16, 0.2, None, 800.0), (16, 0.2, None, 820.0),  # one seed label twice: no spread
        ]
    )  # fmt: skip
    noise = seed_noise(trials)
    logs = [np.log([900, 1100]), np.log([300, 330, 270])]
    squares = sum(float(((x - x.mean()) ** 2).sum()) for x in logs)
    assert noise.sigma == pytest.approx(math.sqrt(squares / (1 + 2)))
    assert (noise.points, noise.trials, noise.unreached) == (2, 5, 1)
    assert noise.ok and noise.factor == pytest.approx(math.exp(noise.sigma))
    assert seed_noise(_trials([(16, 0.1, 1, 900.0), (32, 0.1, 2, 500.0)])).ok is False
    empty = seed_noise(
        pd.DataFrame(columns=["batch_size", "learning_rate", "seed", "steps_to_target"])
    )
    assert not empty.ok and empty.points == 0
