"""What a backend proposes from, read off a ledger: robust bests per batch size and the window
they centre every stratum's search on."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.config.target import Target
from study.ledger import Ledger, StudyRecord
from study.tuners.history import best_rate, read_history, step_bound, stratum_best
from study.tuners.transfer import MARGIN, WINDOW_FACTOR, BestRate
from tests.fakes import finished_trial, rising_curve, write_ledger

TARGET = Target.parse("val_accuracy>=0.6")
STUDY = {
    "name": "history",
    "workload": "tabular",
    "target": str(TARGET),
    "budget": {"max_steps": 5000},
    "trials_per_stratum": 8,
    "search_space": {
        "batch_size": [16, 32, 64, 128, 256],
        "learning_rate": {"low": 1.0e-4, "high": 3.0},
        "strategy": ["default"],
    },
}


def law(batch: int) -> float:
    return 2e-3 * batch**0.7


def trial(batch: int, number: int, lr: float, steps: float, seed: int | None = None):
    t = finished_trial(Stratum(batch, "default"), number, lr, rising_curve(batch, steps), TARGET)
    return dataclasses.replace(t, extras={"seed": seed} if seed is not None else {})


def test_a_point_confirmed_under_other_seeds_beats_a_lucky_single_trial():
    lucky, steady = 0.1, 0.2
    trials = [
        trial(64, 0, lucky, 150),
        trial(64, 1, steady, 200),
        trial(64, 2, lucky, 300, seed=1),
        trial(64, 3, lucky, 320, seed=2),
        trial(64, 4, steady, 180, seed=1),
        trial(64, 5, steady, 230, seed=2),
    ]
    steps = [t.steps_to_target for t in trials]  # first evaluations at or after those
    assert steps[0] < min(steps[1], steps[4], steps[5])

    best, estimate = stratum_best(trials)

    assert best.number == 1 and best.learning_rate == steady
    assert (estimate.seeds, estimate.low, estimate.high) == (3, steps[4], steps[5])
    assert estimate.steps == steps[1]  # the median of the three seeds
    # without confirmations the fewest steps win, as before
    assert stratum_best(trials[:2])[0].learning_rate == lucky


def test_every_stratum_is_centred_on_the_power_law_of_the_others(tmp_path: Path):
    """Best rates on lr = 0.002 B^0.7 at 32..256 (each batch size: its best at the law, two
    worse trials around it): batch 16's window is centred on the law's prediction, and the
    window of a stratum that has trials of its own too."""
    config = parse_study(STUDY, "history.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "history")
    trials = []
    for batch in (32, 64, 128, 256):
        best = 5000 / batch
        trials += [
            trial(batch, 0, law(batch), best),
            trial(batch, 1, law(batch) * 3, best * 1.4),
            trial(batch, 2, law(batch) / 3, best * 1.6),
        ]
    write_ledger(ledger, StudyRecord(name="history"), trials)

    history = read_history(ledger, config, Stratum(16, "default"), budget=8)
    assert [(n.batch_size, n.learning_rate, n.trials) for n in history.neighbours] == [
        (b, pytest.approx(law(b)), 3) for b in (32, 64, 128, 256)
    ]
    assert all(n.informative and not (n.open_low or n.open_high) for n in history.neighbours)
    assert history.centre == pytest.approx(law(16))
    low, high = history.window
    assert low == pytest.approx(law(32) / 2 / MARGIN) and high == pytest.approx(law(32) * MARGIN)
    assert history.budget == 8

    # a stratum in the middle: the window covers its own best rate too
    middle = read_history(ledger, config, Stratum(64, "default"))
    assert middle.centre == pytest.approx(law(64))
    assert middle.window[0] <= law(64) / MARGIN and middle.window[1] >= law(64) * MARGIN


def test_without_transfer_every_stratum_searches_the_whole_range(tmp_path: Path):
    config = parse_study({**STUDY, "tuner": {"transfer": False}}, "history.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "history")
    write_ledger(ledger, StudyRecord(name="history"), [trial(64, 0, 0.05, 100)])
    history = read_history(ledger, config, Stratum(32, "default"))
    assert history.window == (1e-4, 3.0)
    assert history.centre is None and history.neighbours == ()


def test_step_bound_from_the_other_batch_sizes():
    # halving the batch size at most doubles the steps; a larger batch size never needs more
    assert step_bound(128, [(256, 78.0)], 2.0) == pytest.approx(2 * 78 * 2)
    assert step_bound(128, [(64, 300.0), (512, 60.0)], 1.0) == pytest.approx(240.0)
    assert step_bound(128, [(64, 200.0), (512, 60.0)], 1.0) == pytest.approx(200.0)
    assert step_bound(128, [], 2.0) == math.inf
    assert step_bound(128, [(256, math.inf)], 2.0) == math.inf


def test_the_history_carries_the_steps_of_the_other_batch_sizes(tmp_path: Path):
    config = parse_study(STUDY, "history.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "history")
    write_ledger(
        ledger, StudyRecord(name="history"), [trial(64, 0, 0.05, 100), trial(256, 0, 0.2, 30)]
    )
    history = read_history(ledger, config, Stratum(128, "default"))
    steps = {t.stratum.batch_size: t.steps_to_target for t in ledger.trials(Stratum(64, "default"))}
    assert dict(history.neighbour_steps)[64] == steps[64]
    assert set(dict(history.neighbour_steps)) == {64, 256}


def test_a_best_rate_knows_the_rates_tried_around_it():
    """The range counts every trial at the study's seed that ran to an outcome (a rate that
    did not reach the target closes that side), not confirmations under other seeds."""
    short = rising_curve(64, 1000)[:20]  # stops well below the target
    missed = finished_trial(Stratum(64, "default"), 2, 0.3, short, TARGET)
    trials = [trial(64, 0, 0.01, 200), trial(64, 1, 0.03, 120), missed]
    assert missed.steps_to_target is None and missed.result is not None
    assert best_rate(trials) == BestRate(64, 0.03, 3, 0.01, 0.3, trials[1].steps_to_target)
    at_top = best_rate([*trials[:2], trial(64, 3, 0.3, 150, seed=1)])
    assert (at_top.trials, at_top.high, at_top.open_high) == (2, 0.03, True)
    assert best_rate([trials[2]]) is None


def test_a_poor_first_trial_elsewhere_does_not_centre_the_search(tmp_path: Path):
    """Batch 256 has one trial, at a poor rate that still reached the target: batch 128 is
    searched over the whole range. Once 256 tried a second, lower rate, its best is at the top
    of its rates, and 128's window reaches a factor `WINDOW_FACTOR` above it."""
    config = parse_study(STUDY, "history.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), "history")
    write_ledger(ledger, StudyRecord(name="history"), [trial(256, 0, 0.0028, 400)])
    lone = read_history(ledger, config, Stratum(128, "default"))
    assert lone.window == (1e-4, 3.0) and lone.centre is None
    assert [n.trials for n in lone.neighbours] == [1]

    ledger = Ledger.open(str(tmp_path / "k.journal"), "history")
    write_ledger(
        ledger, StudyRecord(name="history"), [trial(256, 0, 0.0028, 400), trial(256, 1, 1e-3, 900)]
    )
    bound = read_history(ledger, config, Stratum(128, "default"))
    assert bound.window[1] == pytest.approx(0.0028 * WINDOW_FACTOR)
    assert bound.window[0] <= bound.centre <= 0.0028
