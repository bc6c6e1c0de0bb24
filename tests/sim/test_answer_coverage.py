"""The surrogate's intervals against a known truth, on synthetic studies with seed noise and a
jagged learning-rate response (the full check: ``benchmarks/answer_coverage.py``)."""

from __future__ import annotations

import numpy as np
from sim.answer_coverage import ANSWERS, answer_coverage, answer_outcomes
from sim.simulate import StudyDesign

DESIGN = StudyDesign(batch_sizes=(16, 32, 64, 128, 256, 512, 1024), trials_per_batch=8, jagged=0.15)


def test_one_study_gives_every_answer_an_interval():
    outcomes = answer_outcomes(DESIGN, np.random.default_rng(0))
    names = {o.parameter for o in outcomes}
    assert {"b_noise", "alpha", "perfect_end", "critical_batch", "sigma"} <= names <= set(ANSWERS)
    for o in outcomes:
        assert o.low <= o.estimate <= o.high, o


def test_intervals_hold_the_truth_most_of_the_time():
    table = answer_coverage(DESIGN, 16, seed=3).set_index("answer")
    for name in ("b_noise", "alpha", "s_min", "perfect_end"):
        assert table.loc[name, "studies"] >= 14
        assert table.loc[name, "coverage"] >= 0.8, table


def test_intervals_printed_open_are_counted_apart():
    # The quickstart's size with B_noise far above its largest batch size: S(B) scales
    # perfectly over the measured range, so some intervals end on the search range.
    import dataclasses

    from sim.simulate import QUICKSTART

    design = dataclasses.replace(QUICKSTART, b_noise_range=(20_000.0, 50_000.0))
    table = answer_coverage(design, 8, seed=0).set_index("answer")
    assert table.loc["b_noise", "open"] > 0
    assert table.loc["b_noise", "open_held"] == 1.0  # "at least ..." holds the truth
    # `studies` and `coverage` count the two-sided intervals alone.
    total = table.loc["b_noise", "studies"] / (1.0 - table.loc["b_noise", "open"])
    assert 1 <= round(total) <= 8
    assert table.loc["alpha", "open"] == 0.0
