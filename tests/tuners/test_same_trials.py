"""`study.tuners.same_trials.SameTrials`: a pure function of trials computed once for the same
trial objects, again when one of them changes, per key, for the latest keys only."""

from __future__ import annotations

from study.config.space import Stratum
from study.config.target import Target
from study.tuners.history import best_rate
from study.tuners.same_trials import SameTrials
from tests.fakes import finished_trial, rising_curve

TARGET = Target.parse("val_accuracy>=0.6")


def trials(*steps: int, batch: int = 64) -> list:
    return [
        finished_trial(Stratum(batch, "default"), i, 0.01 * (i + 1), rising_curve(batch, s), TARGET)
        for i, s in enumerate(steps)
    ]


def test_the_same_objects_are_computed_once_and_new_ones_again() -> None:
    calls: list[int] = []
    best = SameTrials(lambda t: calls.append(len(t)) or best_rate(t))
    first = trials(300, 200, 250)
    assert best(first, "a") == best(list(first), "a") == best_rate(first)
    assert calls == [3]
    changed = first[:2] + trials(300, 200, 150)[2:]  # the last trial read anew, now faster
    assert best(changed, "a").learning_rate == 0.03
    assert calls == [3, 3]


def test_each_key_keeps_its_own_and_only_the_latest_keys_are_kept() -> None:
    calls: list[str] = []
    count = SameTrials(lambda t: calls.append("x") or len(t), keep=2)
    a, b, c = trials(100), trials(100, 90), trials(100, 90, 80)
    assert [count(a, 1), count(b, 2), count(a, 1), count(b, 2)] == [1, 2, 1, 2]
    assert len(calls) == 2
    count(c, 3)  # the least recent key (1) goes
    assert count(a, 1) == 1 and len(calls) == 4
