"""The hold rule: steps to target is the first step from which the target holds through its
window, the same whichever evaluations of the path one sees (as long as no window lies unseen
between two of them: `Hold.max_gap`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from study.config.hold import DEFAULT_HOLD, Crossings, Hold
from study.config.rules import FieldError


def held_on(path: list[bool], steps: list[int], hold: Hold) -> tuple[int | None, list]:
    crossings = Crossings(hold)
    for step in steps:
        if crossings.observe(step, path[step]) is not None:
            break
    return crossings.held, crossings.fell_back


def every_step_answer(path: list[bool], hold: Hold) -> int | None:
    """The rule by its definition, straight from the path."""
    for s in range(len(path)):
        end = s + hold.window(s)
        if end < len(path) and all(path[s : end + 1]):
            return s
    return None


def test_the_window_is_a_share_of_the_steps_with_a_floor() -> None:
    assert Hold(0.05, 5) == DEFAULT_HOLD
    assert [DEFAULT_HOLD.window(s) for s in (0, 50, 100, 101, 1000, 20_000)] == [
        5, 5, 5, 6, 50, 1000,
    ]  # fmt: skip
    assert Hold.OFF.window(1000) == 0 and not Hold.OFF.active and DEFAULT_HOLD.active
    assert Hold.OFF.max_gap(1000) is None and DEFAULT_HOLD.max_gap(1000) == 1051


@pytest.mark.parametrize("seed", range(20))
def test_any_sampling_within_the_gap_finds_the_rules_step(seed: int) -> None:
    """Random hovering paths, seen at every step, on a fixed cadence and on a geometric one
    (each capped at `max_gap`, as the trainer caps them), with every step seen around a
    crossing (the exact replay): one answer, the definition's."""
    rng = np.random.default_rng(seed)
    level = np.cumsum(rng.normal(0.004, 0.05, 3000))
    path = list(level + rng.normal(0, 0.2, 3000) > 2.0)
    truth = every_step_answer(path, DEFAULT_HOLD)
    assert truth is not None and path.index(True) < truth  # it hovers before it holds
    for cadence in (
        lambda s: s + 1,
        lambda s: (s // 40 + 1) * 40,
        lambda s: max(s + 1, math.ceil(s * 1.05)),
    ):
        seen, step = [0], 0
        while step < len(path) - 1:
            step = min(cadence(step), DEFAULT_HOLD.max_gap(step), len(path) - 1)
            seen.append(step)
        found = replayed(path, seen, DEFAULT_HOLD)
        assert found == truth


def replayed(path: list[bool], seen: list[int], hold: Hold) -> int | None:
    """What the trainer does: on a cadence until an evaluation meets the target after unseen
    steps, then every step from the last failing evaluation while a crossing is open."""
    crossings, previous, i = Crossings(hold), None, 0
    step = seen[0]
    while step < len(path):
        met = path[step]
        if met and not crossings.open and previous is not None and step - previous > 1:
            step = previous + 1  # go back and look at every step
            while step < len(path):
                if crossings.observe(step, path[step]) is not None:
                    return crossings.held
                if not crossings.open and step >= seen[i]:
                    break
                step += 1
            previous = step
        else:
            if crossings.observe(step, met) is not None:
                return crossings.held
            previous = step
        while i < len(seen) and seen[i] <= step:
            i += 1
        if i == len(seen):
            return None
        step = seen[i] if not crossings.open else step + 1
    return None


def test_crossings_that_fall_back_are_kept() -> None:
    path = [False] * 10 + [True] * 3 + [False] + [True] * 8 + [False] * 2
    held, fell = held_on(path, list(range(len(path))), Hold(0.0, 5))
    assert held == 14 and fell == [(10, 13)]
    held, fell = held_on(path, list(range(len(path))), Hold.OFF)
    assert held == 10 and fell == []


def test_a_crossing_the_path_ends_inside_is_not_held() -> None:
    path = [False] * 10 + [True] * 4
    assert held_on(path, list(range(len(path))), Hold(0.0, 5)) == (None, [])


@pytest.mark.parametrize(
    ("text", "hold"),
    [
        ("5%,5", Hold(0.05, 5)),
        ("10%", Hold(0.1, 5)),
        ("0.02,20", Hold(0.02, 20)),
        ("off", Hold.OFF),
    ],
)
def test_parse_and_params_round_trip(text: str, hold: Hold) -> None:
    assert Hold.parse(text) == hold
    assert Hold.from_param(hold.to_param()) == hold


def test_a_record_without_the_rule_reads_as_the_first_crossing() -> None:
    assert Hold.from_param(None) is Hold.OFF


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("abc", "--target-hold: cannot parse 'abc'; write PCT%,N"),
        ("5", "--target-hold must be a fraction in [0, 1] or a percentage (e.g. 5%)"),
        ("150%", "--target-hold must be a share of the steps from 0% to 100% (got '150%')"),
        ("5%,-1", "--target-hold needs N >= 0 (the least window, in steps) (got '5%,-1')"),
    ],
)
def test_bad_rules_name_the_flag(text: str, words: str) -> None:
    with pytest.raises(FieldError) as err:
        Hold.parse(text, option="--target-hold")
    assert words in str(err.value)
