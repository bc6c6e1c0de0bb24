"""Exact steps to target: a trial that first meets its target at a cadence evaluation returns to
the state of the previous one and replays the steps between, evaluating every step. The result
must be the step a run evaluating every step finds, with identical losses on the replay."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from study.config.hold import DEFAULT_HOLD, Hold
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
from study.results import TrialResult, TrialState
from study.trainer.loop import train
from study.workloads import Dataset, Workload, get_workload
from study.workloads.base import Streams
from tests.fakes import tabular_spec
from tests.trainer.conftest import shuffled_blocks

pytestmark = pytest.mark.slow

TARGET = Target.parse("val_accuracy>=0.9")


@pytest.fixture(scope="module")
def tabular() -> tuple[Workload, Dataset]:
    workload = get_workload("tabular", {"rows": 2000})
    return workload, workload.load()


def run(spec: TrialSpec, tabular, strategy, data: Dataset | Streams | None = None) -> TrialResult:
    workload, arrays = tabular
    return train(
        spec,
        data if data is not None else arrays,
        lambda: workload.build_model("mlp", arrays),
        *strategy,
    )


def spec(cadence: str, **changes: Any) -> TrialSpec:
    fields = {"target": TARGET, "budget": Budget(max_steps=2000), **changes}
    return tabular_spec(cadence=EvalCadence.parse(cadence), **fields)


@pytest.mark.parametrize("cadence", ["geometric:1.3", "25"])
def test_replay_finds_the_step_an_every_step_evaluation_finds(
    tabular, default_strategy, cadence: str
) -> None:
    coarse = run(spec(cadence, exact_steps=False), tabular, default_strategy)
    exact = run(spec(cadence), tabular, default_strategy)
    every = run(spec("1"), tabular, default_strategy)

    assert coarse.state is exact.state is every.state is TrialState.REACHED
    assert exact.steps_to_target == every.steps_to_target
    assert exact.steps_to_target < coarse.steps_to_target  # the cadence overshot
    # The cadence evaluations are those of the coarse run up to the last failing one; from there
    # every step is evaluated, through the step where the target first held.
    cadence_points = [(m.step, dict(m.metrics)) for m in exact.curve if not m.fine]
    assert cadence_points == [(m.step, dict(m.metrics)) for m in coarse.curve][:-1]
    fine = [m for m in exact.curve if m.fine]
    assert fine and fine[-1].step == exact.steps_to_target
    assert [m.step for m in fine] == list(range(fine[0].step, fine[-1].step + 1))
    assert fine[0].step - 1 == [m.step for m in coarse.curve][-2]
    # A deterministic replay: each fine evaluation is the every-step run's, to the bit.
    by_step = {m.step: m for m in every.curve}
    for m in fine:
        assert m.train_loss == by_step[m.step].train_loss
        assert dict(m.metrics) == dict(by_step[m.step].metrics)
    assert exact.steps_run == exact.steps_to_target  # the trial ends where the target held
    assert exact.environment["replay_steps"] == len(fine)
    # the chunk that overshot is trained again, one step at a time: its steps are counted
    steps = [m.step for m in coarse.curve]
    assert exact.environment["discarded_steps"] == steps[-1] - steps[-2]
    assert exact.timings["replay"] > 0 and coarse.timings["replay"] == 0
    assert exact.seconds_to_target == fine[-1].train_seconds
    cadence_seconds = [m.train_seconds for m in exact.curve if not m.fine]
    assert cadence_seconds[-1] < exact.seconds_to_target == exact.train_seconds


@pytest.fixture(scope="module")
def hovering() -> tuple[Any, Target]:
    """A noisy trial (batch 16, Nesterov at 0.1) whose accuracy crosses 0.8 and falls back many
    times before it stays above, and the target with the default hold rule."""
    return (
        {"batch_size": 16, "optimizer": OptimizerSpec("nesterov", 0.1)},
        replace(Target.parse("val_accuracy>=0.8"), hold=DEFAULT_HOLD),
    )


def test_a_hovering_metric_gives_the_same_step_at_every_cadence(
    tabular, default_strategy, hovering
) -> None:
    noisy, target = hovering
    results = {
        cadence: run(
            spec(cadence, target=target, budget=Budget(max_steps=600), **noisy),
            tabular,
            default_strategy,
        )
        for cadence in ("1", "40", "geometric:1.05")
    }
    every = results["1"]
    assert {r.state for r in results.values()} == {TrialState.REACHED}
    assert {r.steps_to_target for r in results.values()} == {every.steps_to_target}
    # The metric really hovers: it met the target well before it held, then missed it again.
    first = next(m.step for m in every.curve if target.met_by(m.metrics))
    assert first < every.steps_to_target and every.fell_back
    assert every.fell_back[0][0] == first
    # From the step it held, it holds at every step through its window (and not from earlier).
    held, window = every.steps_to_target, DEFAULT_HOLD.window(every.steps_to_target)
    by_step = {m.step: m for m in every.curve}
    assert all(target.met_by(by_step[s].metrics) for s in range(held, held + window + 1))
    assert not target.met_by(by_step[held - 1].metrics)
    for r in results.values():  # a crossing a cadence saw fall back is one on the true path
        for met, missed in r.fell_back:
            assert target.met_by(by_step[met].metrics) and not target.met_by(
                by_step[missed].metrics
            )
        assert r.examples_to_target == held * 16
    # Without the rule the first crossing counts, and it depends on the cadence.
    off = replace(target, hold=Hold.OFF)
    firsts = {
        cadence: run(
            spec(cadence, target=off, budget=Budget(max_steps=600), exact_steps=False, **noisy),
            tabular,
            default_strategy,
        ).steps_to_target
        for cadence in ("1", "40")
    }
    assert firsts["1"] == first and firsts["40"] != firsts["1"]


def test_a_crossing_the_budget_ends_before_it_holds_is_not_reached(
    tabular, default_strategy, hovering
) -> None:
    noisy, target = hovering
    every = run(
        spec("1", target=target, budget=Budget(max_steps=600), **noisy), tabular, default_strategy
    )
    cut = spec("40", target=target, budget=Budget(max_steps=every.steps_to_target + 2), **noisy)
    short = run(cut, tabular, default_strategy)
    assert short.state is TrialState.NOT_REACHED and short.steps_to_target is None
    assert short.steps_run == every.steps_to_target + 2


def test_replay_on_the_streamed_path(tabular, default_strategy) -> None:
    """The streamed order is replayed by skipping the batches taken in a fresh seeded order.
    (A smooth path, plain SGD on the loss: with a noisy one the metric can dip under the
    target and back between two cadence evaluations, and a replay searches only the interval
    where the cadence first saw the target met, as Shallue et al.'s reading does.)"""
    streams = shuffled_blocks(tabular[1])
    smooth = {"target": Target.parse("val_loss<=0.3"), "optimizer": OptimizerSpec("sgd", 0.3)}
    exact = run(spec("geometric:1.3", **smooth), tabular, default_strategy, streams)
    every = run(spec("1", **smooth), tabular, default_strategy, streams)

    assert exact.state is TrialState.REACHED
    assert exact.steps_to_target == every.steps_to_target
    fine = [m for m in exact.curve if m.fine]
    assert fine and fine[-1].step == exact.steps_to_target  # the cadence overshot: a replay
    assert [m.train_loss for m in fine] == [
        m.train_loss for m in every.curve if m.step in {f.step for f in fine}
    ]


def test_no_replay_when_the_target_is_met_at_the_first_evaluations(
    tabular, default_strategy
) -> None:
    easy = run(spec("1", target=Target.parse("val_loss<=100")), tabular, default_strategy)
    assert easy.steps_to_target == 0 and easy.environment["replay_steps"] == 0
    assert not any(m.fine for m in easy.curve)
