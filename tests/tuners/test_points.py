"""No wasted trials: the tolerance rule, the nudge, and reserving points in a shared ledger."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from study.config.space import FloatParam, Stratum
from study.ledger import Ledger
from study.results import TrialResult, TrialState
from study.tuners.optuna_space import to_optuna_distribution
from study.tuners.points import (
    LR_TOLERANCE,
    clashes,
    free,
    nudge,
    others,
    point_of,
    same_point,
    settle,
)

S = Stratum(64, "default")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"learning_rate": 0.1}, {"learning_rate": 0.1}, True),
        ({"learning_rate": 0.1}, {"learning_rate": 0.1 * math.exp(0.0049)}, True),
        ({"learning_rate": 0.1}, {"learning_rate": 0.1 * math.exp(-0.0049)}, True),
        ({"learning_rate": 0.1}, {"learning_rate": 0.1 * math.exp(0.0051)}, False),
        ({"learning_rate": 0.1, "momentum": 0.9}, {"learning_rate": 0.1, "momentum": 0.9}, True),
        ({"learning_rate": 0.1, "momentum": 0.9}, {"learning_rate": 0.1, "momentum": 0.91}, False),
        (
            {"learning_rate": 0.1, "warmup_steps": 0},
            {"learning_rate": 0.1, "warmup_steps": 10},
            False,
        ),
        (
            {"learning_rate": 0.1, "schedule": "cosine"},
            {"learning_rate": 0.1, "schedule": "cosine"},
            True,
        ),
    ],
)
def test_same_point_within_half_a_percent_in_log_space_and_equal_otherwise(a, b, same):
    assert same_point(point_of(a), point_of(b)) is same
    assert same_point(point_of(b), point_of(a)) is same


def test_a_point_under_another_seed_is_another_trial():
    lr = {"learning_rate": 0.1}
    assert not same_point(point_of(lr), point_of(lr, 1))
    assert not same_point(point_of(lr, 1), point_of(lr, 2))
    assert same_point(point_of(lr, 2), point_of(lr, 2))


def test_nudge_moves_the_rate_just_clear_of_every_taken_point():
    taken = [point_of({"learning_rate": 0.1})]
    moved = nudge({"learning_rate": 0.1}, None, taken, 0.01, 1.0)
    assert moved["learning_rate"] == pytest.approx(0.1 * math.exp(2 * LR_TOLERANCE))
    assert not clashes(point_of(moved), taken)
    # the next slot over is taken too: it goes the other way (odd order starts downwards)
    taken.append(point_of(moved))
    down = nudge({"learning_rate": 0.1}, None, taken, 0.01, 1.0, order=1)
    assert down["learning_rate"] == pytest.approx(0.1 * math.exp(-2 * LR_TOLERANCE))
    # at the range's upper end it can only go down
    edge = nudge({"learning_rate": 1.0}, None, [point_of({"learning_rate": 1.0})], 0.01, 1.0)
    assert edge["learning_rate"] < 1.0 and not clashes(
        point_of(edge), [point_of({"learning_rate": 1.0})]
    )


def test_free_keeps_a_free_point_redraws_a_taken_one_then_nudges():
    taken = [point_of({"learning_rate": 0.1})]
    assert free({"learning_rate": 0.2}, None, taken, None, (0.01, 1.0)) == {"learning_rate": 0.2}

    draws = iter([{"learning_rate": 0.1002}, {"learning_rate": 0.3}])
    calls = []

    def redraw(attempt, seen):
        calls.append((attempt, len(seen)))
        return next(draws)

    assert free({"learning_rate": 0.1}, None, taken, redraw, (0.01, 1.0)) == {"learning_rate": 0.3}
    assert calls == [(0, 1), (1, 1)]  # the first redraw clashed too

    def same(attempt, seen):
        return {"learning_rate": 0.1}

    nudged = free({"learning_rate": 0.1}, None, taken, same, (0.01, 1.0))
    assert not clashes(point_of(nudged), taken)


def ledger_with(tmp_path: Path) -> Ledger:
    return Ledger.open(str(tmp_path / "j.journal"), "points")


def test_settle_reserves_a_point_other_slots_see_and_avoid(tmp_path):
    ledger = ledger_with(tmp_path)
    first = ledger.claim(S, budget=10)
    second = ledger.claim(S, budget=10)
    assert first is not None and second is not None

    kept = settle(ledger, first, {"learning_rate": 0.1}, None, (0.01, 1.0))
    assert kept == {"learning_rate": 0.1}
    assert others(ledger, second) == [point_of(kept)]  # running, params not yet recorded

    moved = settle(ledger, second, {"learning_rate": 0.1002}, None, (0.01, 1.0))
    assert not same_point(point_of(moved), point_of(kept))
    assert dict(ledger.tuning.points(S)) == {
        first.number: point_of(kept),
        second.number: point_of(moved),
    }


def test_finished_trials_count_by_their_params_and_interrupted_ones_not_at_all(tmp_path):
    ledger = ledger_with(tmp_path)
    done = ledger.claim(S, budget=10)
    assert done is not None
    dist = {"learning_rate": to_optuna_distribution(FloatParam("learning_rate", 0.01, 1.0, True))}
    ledger.tuning.record_params(done, {"learning_rate": 0.25}, dist)
    ledger.finish(done, TrialResult(state=TrialState.NOT_REACHED), 100.0)
    stopped = ledger.claim(S, budget=10)
    assert stopped is not None
    ledger.tuning.reserve(stopped, point_of({"learning_rate": 0.5}))
    ledger.interrupt(stopped)

    assert ledger.tuning.points(S) == [(done.number, {"learning_rate": 0.25, "seed": None})]
    again = ledger.claim(S, budget=10)
    assert again is not None
    # the interrupted trial's point is free again; the finished one is not
    assert settle(ledger, again, {"learning_rate": 0.5}, None, (0.01, 1.0)) == {
        "learning_rate": 0.5
    }
    moved = settle(ledger, again, {"learning_rate": 0.25}, None, (0.01, 1.0))
    assert moved["learning_rate"] != 0.25


def test_two_slots_that_reserved_one_point_at_once_never_both_keep_it(tmp_path):
    """The race: both reserved the same point before either read. Each sees the other's
    reservation, so both draw again (to different points: nudges go opposite ways)."""
    ledger = ledger_with(tmp_path)
    a, b = ledger.claim(S, budget=10), ledger.claim(S, budget=10)
    assert a is not None and b is not None
    ledger.tuning.reserve(a, point_of({"learning_rate": 0.1}))
    ledger.tuning.reserve(b, point_of({"learning_rate": 0.1}))
    kept_b = settle(ledger, b, {"learning_rate": 0.1}, None, (0.01, 1.0))
    kept_a = settle(ledger, a, {"learning_rate": 0.1}, None, (0.01, 1.0))
    points = [p for _, p in ledger.tuning.points(S)]
    assert len(points) == 2 and not same_point(points[0], points[1])
    assert not same_point(point_of(kept_a), point_of(kept_b))


def test_the_rate_index_answers_as_clashes_does():
    """`free` and `nudge` check proposals against taken points indexed by log rate; on points
    at and just past the tolerance, under two seeds, with another parameter and without a
    rate, the index says what `clashes` says."""
    import random

    from study.tuners.points import LR_TOLERANCE, _Taken, clashes

    rng = random.Random(3)
    taken = [
        point_of({"learning_rate": 0.1 * math.exp(rng.uniform(-0.05, 0.05)), "momentum": m}, s)
        for m in (0.9, 0.99)
        for s in (None, 1)
        for _ in range(40)
    ] + [point_of({"momentum": 0.9}), point_of({"learning_rate": 0.0, "momentum": 0.9})]
    index = _Taken(taken)
    asked = [
        point_of({"learning_rate": p["learning_rate"] * math.exp(d), "momentum": m}, s)
        for p in taken[:80:7]
        for d in (0.0, LR_TOLERANCE * 0.999, -LR_TOLERANCE * 1.001, 0.02)
        for m in (0.9, 0.95)
        for s in (None, 2)
    ] + [point_of({"momentum": 0.9}), point_of({"learning_rate": 0.1})]
    far = point_of({"learning_rate": 5.0, "momentum": 0.9})  # only the point without a rate
    assert index.clashes(far) and clashes(far, taken)
    answers = [index.clashes(p) for p in asked]
    assert answers == [clashes(p, taken) for p in asked]
    assert any(answers) and not all(answers)
