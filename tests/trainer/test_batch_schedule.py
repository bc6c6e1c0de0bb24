"""A batch-size schedule in the trainer: the global batch changes at the steps the examples seen
call for, examples are the sum of the batches, the rate follows the batch, one trace serves
every stage, exact steps replay across a stage change to the every-step run's bits, and
``mirrored:2`` on logical CPUs trains the same schedule as one device."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from study.config.schedule import BatchSchedule, Stage
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
from study.errors import FieldError, UsageError
from study.results import TrialResult, TrialState
from study.trainer.loop import train
from study.trainer.session import SessionCache
from study.trainer.stages import Stages
from study.workloads import Dataset, Workload, get_workload
from tests.fakes import tabular_spec
from tests.trainer.conftest import run_script, shuffled_blocks

pytestmark = pytest.mark.slow

#: 20 steps of 16 (320 examples), then 64 at twice the rate (alpha 0.5: (64 / 16) ** 0.5 = 2).
SCHEDULE = BatchSchedule((Stage(0, 16), Stage(320, 64)), learning_rate=0.05, alpha=0.5)
TARGET = Target.parse("val_accuracy>=0.9")


@pytest.fixture(scope="module")
def tabular() -> tuple[Workload, Dataset]:
    workload = get_workload("tabular", {"rows": 2000})
    return workload, workload.load()


def scheduled(cadence: str = "10", **changes: Any) -> TrialSpec:
    schedule = changes.pop("schedule", SCHEDULE)
    return tabular_spec(cadence=EvalCadence.parse(cadence), **changes).with_batch_schedule(schedule)


def run(spec: TrialSpec, tabular, strategy, cache: SessionCache | None = None) -> TrialResult:
    workload, data = tabular
    return train(spec, data, lambda: workload.build_model("mlp", data), *strategy, cache=cache)


def test_the_batch_changes_where_the_examples_say_and_examples_are_summed(
    tabular, default_strategy
) -> None:
    cache = SessionCache()
    result = run(scheduled(budget=Budget(max_steps=40)), tabular, default_strategy, cache)
    assert [(m.step, m.examples) for m in result.curve] == [
        (0, 0),
        (10, 160),
        (20, 320),
        (30, 320 + 10 * 64),
        (40, 320 + 20 * 64),
    ]
    assert result.steps_run == 40 and result.examples_run == 320 + 20 * 64
    session = cache.session
    assert session is not None and session.feed.batch_size == 64
    assert float(session.optimizer.learning_rate) == pytest.approx(0.1)  # 0.05 x 2
    # Through the first stage the trial is a fixed batch-16 trial, to the bit; after it, not.
    fixed = tabular_spec(
        batch_size=16,
        optimizer=OptimizerSpec(name="nesterov", learning_rate=SCHEDULE.learning_rate),
        budget=Budget(max_steps=40),
    )
    plain = run(fixed, tabular, default_strategy, cache)
    assert [m.train_loss for m in result.curve[:3]] == [m.train_loss for m in plain.curve[:3]]
    assert result.curve[3].train_loss != plain.curve[3].train_loss


def test_one_trace_serves_every_stage_and_the_next_trial(tabular, default_strategy) -> None:
    cache = SessionCache()
    three = BatchSchedule((Stage(0, 8), Stage(80, 32), Stage(400, 128)), learning_rate=0.05)
    first = run(
        scheduled(budget=Budget(max_steps=30), schedule=three), tabular, default_strategy, cache
    )
    assert first.examples_run == 80 + 10 * 32 + 10 * 128
    session = cache.session
    assert session is not None
    assert session.train_function.experimental_get_tracing_count() == 1
    again = run(scheduled(budget=Budget(max_steps=30)), tabular, default_strategy, cache)
    assert again.environment["reused"] is True
    assert session.train_function.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("cadence", ["200", "50"])
def test_exact_steps_replay_across_a_stage_change(tabular, default_strategy, cadence) -> None:
    """Cadence 200: met at step 200 in the second stage, the trial goes back to step 0 (first
    stage) and replays one step at a time across the change; cadence 50: back to step 150."""
    budget = Budget(max_steps=400)
    exact = run(scheduled(cadence, target=TARGET, budget=budget), tabular, default_strategy)
    every = run(scheduled("1", target=TARGET, budget=budget), tabular, default_strategy)
    assert exact.state is every.state is TrialState.REACHED
    assert exact.steps_to_target == every.steps_to_target > 20  # past the first stage
    assert exact.examples_to_target == SCHEDULE.examples_after(exact.steps_to_target)
    by_step = {m.step: m for m in every.curve}
    fine = [m for m in exact.curve if m.fine]
    assert fine and fine[-1].step == exact.steps_to_target
    for m in fine:
        assert m.train_loss == by_step[m.step].train_loss
        assert dict(m.metrics) == dict(by_step[m.step].metrics)
        assert m.examples == by_step[m.step].examples


class _Feed:
    max_steps_per_call = 100


class _Session:
    """What `Stages` drives: the batch and base rate it sets, call by call."""

    def __init__(self) -> None:
        self.feed = _Feed()
        self.applied: list[tuple[int, float]] = []

    def set_batch(self, batch_size: int, rate: float) -> None:
        self.applied.append((batch_size, rate))


def test_a_stage_warmup_ramps_the_rate_one_step_a_call() -> None:
    """Stages (0, 16), (320, 64) at 0.05, alpha 0.5 (0.1 at 64), 4 ramp steps: steps 20..23
    train at 64 and 0.06, 0.07, 0.08, 0.09, one step a call, then 0.1 in calls of any length;
    a restore (`forget`) mid-ramp sets the step's rate again."""
    ramped = dataclasses.replace(SCHEDULE, stage_warmup_steps=4)
    stages = Stages(scheduled(schedule=ramped), _Session())  # type: ignore[arg-type]
    session = stages.session
    calls = []
    step = 0
    while step < 40:
        count = stages.enter(step, 40)
        calls.append((step, count))
        step += count
    assert calls == [(0, 20), (20, 1), (21, 1), (22, 1), (23, 1), (24, 16)]
    batches = [b for b, _ in session.applied]
    assert batches == [16, 64, 64, 64, 64, 64]
    rates = [r for _, r in session.applied]
    assert rates == pytest.approx([0.05, 0.06, 0.07, 0.08, 0.09, 0.1])
    stages.forget()
    assert stages.enter(22, 40) == 1 and session.applied[-1] == (64, pytest.approx(0.08))
    jump = Stages(scheduled(), _Session())  # type: ignore[arg-type]
    assert [jump.enter(0, 40), jump.enter(20, 40)] == [20, 20]  # no ramp: the rate jumps


def test_calls_cut_by_a_stage_warmup_train_the_every_step_run_s_bits(
    tabular, default_strategy
) -> None:
    """The ramp is a function of the step: at cadence 50 (one call to the change, ten 1-step
    calls, longer ones after, a replay once the target is met) every evaluation has the
    validation metrics an every-step run has at that step; the ramp changes training."""
    ramped = dataclasses.replace(SCHEDULE, stage_warmup_steps=10)
    budget = Budget(max_steps=200)
    coarse = run(
        scheduled("50", target=TARGET, budget=budget, schedule=ramped), tabular, default_strategy
    )
    every = run(scheduled("1", budget=budget, schedule=ramped), tabular, default_strategy)
    by_step = {m.step: m for m in every.curve}
    assert coarse.state is TrialState.REACHED and coarse.steps_to_target > 20
    assert any(m.fine for m in coarse.curve)
    for m in coarse.curve:
        assert dict(m.metrics) == dict(by_step[m.step].metrics)
        assert m.examples == by_step[m.step].examples
    jump = run(scheduled("1", budget=Budget(max_steps=25)), tabular, default_strategy)
    assert dict(jump.curve[-1].metrics) != dict(by_step[25].metrics)
    assert dict(jump.curve[20].metrics) == dict(by_step[20].metrics)  # the same first stage


def test_the_example_budget_counts_the_schedule_s_examples(tabular, default_strategy) -> None:
    result = run(
        scheduled(budget=Budget(max_steps=None, max_examples=1000)), tabular, default_strategy
    )
    # 20 steps of 16 (320), then 10 of 64 reach 960; an 11th would pass 1,000
    assert result.steps_run == 30 and result.examples_run == 960


def test_bad_schedules_for_the_trial(tabular, default_strategy) -> None:
    odd = BatchSchedule((Stage(0, 16), Stage(320, 33)), learning_rate=0.05)
    with pytest.raises(FieldError, match=r"batch_schedule\.stages\[1\]\.batch_size"):
        run(scheduled(schedule=odd, noise_scale=True), tabular, default_strategy)
    workload, data = tabular
    with pytest.raises(UsageError, match="needs data in memory"):
        train(
            scheduled(),
            shuffled_blocks(data, 64),
            lambda: workload.build_model("mlp", data),
            *default_strategy,
        )
    with pytest.raises(FieldError, match="first batch size"):
        dataclasses.replace(scheduled(), batch_size=32)


MIRRORED_SCRIPT = """
import json
import tensorflow as tf
from study.strategies import HostInfo, build_strategy, configure_devices, resolve
configure_devices(tf, 2)
from study.errors import FieldError
from study.config.schedule import BatchSchedule, Stage
from study.config.trial import Budget
from study.trainer.loop import train
from study.workloads import get_workload
from tests.trainer.test_batch_schedule import scheduled

workload = get_workload("tabular", {"rows": 2000})
data = workload.load()
out = {}
for name in ("default", "mirrored:2"):
    resolved = resolve(name, HostInfo())
    strategy = build_strategy(tf, resolved)
    spec = scheduled(budget=Budget(max_steps=40), strategy=name)
    r = train(spec, data, lambda: workload.build_model("mlp", data), strategy, resolved)
    out[name] = [[m.step, m.examples, m.train_loss] for m in r.curve]
    out[name + "/per_replica"] = r.environment["per_replica_batch"]
odd = BatchSchedule((Stage(0, 16), Stage(320, 33)), learning_rate=0.05)
try:
    spec = scheduled(schedule=odd, strategy="mirrored:2")
    train(spec, data, lambda: workload.build_model("mlp", data), strategy, resolved)
except FieldError as err:
    out["error"] = str(err)
print(json.dumps(out))
"""


def test_mirrored_on_two_logical_cpus_trains_the_same_schedule() -> None:
    out = run_script(MIRRORED_SCRIPT)
    one, two = out["default"], out["mirrored:2"]
    assert [row[:2] for row in one] == [row[:2] for row in two]
    assert [row[:2] for row in one][-1] == [40, 320 + 20 * 64]
    for (_, _, a), (_, _, b) in zip(one[1:], two[1:], strict=True):
        assert b == pytest.approx(a, rel=1e-3)  # the same arithmetic, summed in another order
    assert out["mirrored:2/per_replica"] == 8  # the first stage's 16 over 2 replicas
    assert out["error"].startswith("batch_schedule.stages[1].batch_size must be divisible by")
