"""Exact steps to target: a trial that first meets its target at a cadence evaluation returns to
the state of the previous one and replays the steps between, evaluating every step. The result
must be the step a run evaluating every step finds, with identical losses on the replay."""

from __future__ import annotations

from typing import Any

import pytest

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
    # The cadence evaluations are those of the coarse run; the replay sits between the last two.
    cadence_points = [(m.step, dict(m.metrics)) for m in exact.curve if not m.fine]
    assert cadence_points == [(m.step, dict(m.metrics)) for m in coarse.curve]
    fine = [m for m in exact.curve if m.fine]
    assert fine and fine[-1].step == exact.steps_to_target
    assert [m.step for m in fine] == list(range(fine[0].step, fine[-1].step + 1))
    assert fine[0].step - 1 == [m.step for m in coarse.curve][-2]
    # A deterministic replay: each fine evaluation is the every-step run's, to the bit.
    by_step = {m.step: m for m in every.curve}
    for m in fine:
        assert m.train_loss == by_step[m.step].train_loss
        assert dict(m.metrics) == dict(by_step[m.step].metrics)
    assert exact.steps_run == coarse.steps_run and exact.environment["replay_steps"] == len(fine)
    assert exact.timings["replay"] > 0 and coarse.timings["replay"] == 0
    assert exact.seconds_to_target == fine[-1].train_seconds
    cadence_seconds = [m.train_seconds for m in exact.curve if not m.fine]
    assert cadence_seconds[-2] < exact.seconds_to_target < cadence_seconds[-1]


def test_replay_on_the_streamed_path(tabular, default_strategy) -> None:
    """The streamed order is replayed by skipping the batches taken in a fresh seeded order.
    (A smooth path, plain SGD on the loss: with a noisy one the metric can dip under the
    target and back between two cadence evaluations, and a replay searches only the interval
    where the cadence first saw the target met, as Shallue et al.'s reading does.)"""
    streams = shuffled_blocks(tabular[1])
    smooth = {"target": Target.parse("val_loss<=0.3"), "optimizer": OptimizerSpec("sgd", 0.05)}
    exact = run(spec("geometric:1.3", **smooth), tabular, default_strategy, streams)
    every = run(spec("1", **smooth), tabular, default_strategy, streams)

    assert exact.state is TrialState.REACHED
    assert exact.steps_to_target == every.steps_to_target
    fine = [m for m in exact.curve if m.fine]
    assert [m.train_loss for m in fine] == [
        m.train_loss for m in every.curve if m.step in {f.step for f in fine}
    ]


def test_no_replay_when_the_target_is_met_at_the_first_evaluations(
    tabular, default_strategy
) -> None:
    easy = run(spec("1", target=Target.parse("val_loss<=100")), tabular, default_strategy)
    assert easy.steps_to_target == 0 and easy.environment["replay_steps"] == 0
    assert not any(m.fine for m in easy.curve)
