"""``study train --target-hold``: the hold rule from the command line, the same steps to target
at any ``--eval-every``, the crossings that fell back in the JSON, a bad rule as one line."""

from __future__ import annotations

import json

import pytest

from study.cli import main

pytestmark = pytest.mark.slow

HOVERING = [
    "train", "--workload", "tabular", "--batch-size", "16", "--lr", "0.1",
    "--target", "val_accuracy>=0.8", "--max-steps", "600", "--no-track", "--json",
]  # fmt: skip


def train(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    assert main([*HOVERING, *flags]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_every_cadence_gives_the_step_the_rule_defines(capsys) -> None:
    runs = {c: train(capsys, "--eval-every", c) for c in ("40", "geometric:1.05")}
    assert {r["status"] for r in runs.values()} == {"reached"}
    assert len({r["steps_to_target"] for r in runs.values()}) == 1
    assert {r["target_hold"] for r in runs.values()} == {"5%,5"}
    held = runs["40"]["steps_to_target"]
    # Without the rule, every step evaluated: the first crossing, which did not hold.
    first = train(capsys, "--eval-every", "1", "--target-hold", "off")
    assert first["target_hold"] == "off" and first["fell_back"] == []
    assert first["steps_to_target"] < held
    assert all(met >= first["steps_to_target"] for met, _ in runs["40"]["fell_back"])
    assert runs["40"]["fell_back"] and runs["40"]["fell_back"][-1][1] < held


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "study train: error: --target-hold: cannot parse 'abc'; write PCT%,N"),
        ("7", "study train: error: --target-hold must be a fraction in [0, 1] or a percentage"),
    ],
)
def test_a_bad_rule_is_one_line_and_exit_2(capsys, value: str, message: str) -> None:
    assert main([*HOVERING, "--target-hold", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
