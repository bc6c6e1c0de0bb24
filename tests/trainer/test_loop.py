"""Tests for study.trainer.loop and study.trainer.optim, in-process on the default strategy.

TensorFlow is imported once in the pytest process (one logical CPU device); multi-replica
strategies are tested through worker processes in tests/runner/test_pool.py.
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, ScheduleSpec, TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.strategies import HostInfo, build_strategy, resolve
from study.trainer import loop
from study.trainer import session as session_module
from study.trainer.loop import IndexStream, train
from study.trainer.optim import (
    WarmupDecay,
    learning_rate,
    make_optimizer,
    resolved_schedule,
    set_learning_rate,
)
from study.workloads import Dataset, Workload, get_workload
from tests.fakes import tabular_spec

BATCH = 64


@pytest.fixture(scope="module")
def tabular() -> tuple[Workload, Dataset]:
    workload = get_workload("tabular", {"rows": 2000})
    return workload, workload.load()


@pytest.fixture(scope="module")
def default_strategy() -> tuple[Any, Any]:
    resolved = resolve("default", HostInfo())
    return build_strategy(tf, resolved), resolved


@pytest.fixture
def run(tabular, default_strategy):
    """Train a spec on the tabular workload (2,000 rows) with the default strategy."""
    workload, data = tabular
    strategy, resolved = default_strategy

    def run_spec(spec: TrialSpec, hook: Any = None) -> TrialResult:
        return train(
            spec, data, lambda: workload.build_model("mlp", data), strategy, resolved, hook=hook
        )

    return run_spec


def steps(result: TrialResult) -> list[int]:
    return [m.step for m in result.curve]


def numbers(result: TrialResult) -> np.ndarray:
    """Everything in the curve except wall-clock time, as an array (NaN where undefined)."""
    return np.array(
        [
            (m.step, m.examples, m.train_loss, *(m.metrics[k] for k in sorted(m.metrics)))
            for m in result.curve
        ]
    )


def check_curve_bookkeeping(result: TrialResult, batch_size: int) -> None:
    curve = result.curve
    assert curve[0].step == 0
    assert curve[0].examples == 0
    assert curve[0].train_seconds == 0.0
    assert math.isnan(curve[0].train_loss)  # no training before the first evaluation
    assert all(m.examples == m.step * batch_size for m in curve)
    assert [m.step for m in curve] == sorted({m.step for m in curve})
    seconds = [m.train_seconds for m in curve]
    assert seconds == sorted(seconds)
    assert result.steps_run == curve[-1].step
    assert result.examples_run == result.steps_run * batch_size
    assert result.train_seconds == pytest.approx(curve[-1].train_seconds)


# Reaching the target


@pytest.mark.slow
def test_reaches_target_on_tabular(run) -> None:
    spec = tabular_spec(
        target=Target.parse("val_accuracy>=0.9"),
        budget=Budget(max_steps=2000),
        cadence=EvalCadence(kind="geometric", ratio=1.05),
    )
    result = run(spec)

    assert result.state is TrialState.REACHED
    first = next(m for m in result.curve if spec.target.met_by(m.metrics))
    cadence = [m for m in result.curve if not m.fine]
    # A cadence evaluation saw it met after unseen steps: the trial went back to the one before
    # and evaluated every step from there, and stops where the target first held.
    assert not any(spec.target.met_by(m.metrics) for m in cadence)
    assert result.curve[-1].fine and result.curve[-1].step == first.step == result.steps_run
    assert cadence[-1].step < first.step
    assert 0 < result.steps_to_target == first.step < 2000
    assert result.examples_to_target == result.steps_to_target * BATCH
    assert result.seconds_to_target == first.train_seconds
    assert 0 < result.seconds_to_target <= result.train_seconds
    check_curve_bookkeeping(result, BATCH)
    assert result.environment["replicas"] == 1
    assert result.environment["per_replica_batch"] == BATCH
    assert result.environment["strategy"] == "default"


# Divergence and budgets


@pytest.mark.slow
def test_absurd_learning_rate_diverges_early(run) -> None:
    spec = tabular_spec(
        optimizer=OptimizerSpec(name="sgd", learning_rate=1e6), budget=Budget(max_steps=1000)
    )
    result = run(spec)

    assert result.state is TrialState.DIVERGED
    assert result.steps_run <= 50
    last = result.curve[-1]
    assert not (math.isfinite(last.train_loss) and math.isfinite(last.metrics["val_loss"]))
    assert result.steps_to_target is None
    assert result.examples_to_target is None
    assert result.seconds_to_target is None


@pytest.mark.slow
def test_step_budget_runs_out(run) -> None:
    result = run(tabular_spec(budget=Budget(max_steps=50)))

    assert result.state is TrialState.NOT_REACHED
    assert result.steps_run == 50
    assert result.examples_run == 50 * BATCH
    assert result.steps_to_target is None
    assert steps(result) == [0, 10, 20, 30, 40, 50]
    check_curve_bookkeeping(result, BATCH)


@pytest.mark.slow
def test_step_budget_off_the_cadence_still_evaluates_at_the_end(run) -> None:
    result = run(tabular_spec(budget=Budget(max_steps=25)))

    assert result.state is TrialState.NOT_REACHED
    assert steps(result) == [0, 10, 20, 25]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("budget", "expected_steps"),
    [
        (Budget(max_steps=None, max_examples=1000), 1000 // BATCH),
        (Budget(max_steps=12, max_examples=1000), 12),
    ],
)
def test_example_budget_limits_steps(run, budget: Budget, expected_steps: int) -> None:
    result = run(tabular_spec(budget=budget))

    assert result.state is TrialState.NOT_REACHED
    assert result.steps_run == expected_steps
    assert result.examples_run == expected_steps * BATCH
    assert result.curve[-1].step == expected_steps


@pytest.mark.slow
def test_time_budget_stops_at_the_first_evaluation_past_it(run) -> None:
    limit = 0.2
    result = run(tabular_spec(budget=Budget(max_steps=None, max_seconds=limit)))

    assert result.state is TrialState.NOT_REACHED
    assert result.train_seconds >= limit
    assert all(m.train_seconds < limit for m in result.curve[:-1])
    assert result.curve[-1].train_seconds >= limit
    check_curve_bookkeeping(result, BATCH)


# Evaluation cadence


@pytest.mark.slow
def test_fixed_cadence(run) -> None:
    result = run(tabular_spec(cadence=EvalCadence(kind="fixed", every=7), budget=Budget(30)))

    assert steps(result) == [0, 7, 14, 21, 28, 30]


@pytest.mark.slow
def test_geometric_cadence(run) -> None:
    result = run(tabular_spec(cadence=EvalCadence.parse("geometric:1.25"), budget=Budget(20)))

    assert steps(result) == [0, 1, 2, 3, 4, 5, 7, 9, 12, 15, 19, 20]
    check_curve_bookkeeping(result, BATCH)


# The measurement hook


@pytest.mark.slow
def test_hook_receives_every_measurement_in_order(run) -> None:
    seen: list[Measurement] = []

    def hook(m: Measurement) -> bool:
        seen.append(m)
        return True

    result = run(tabular_spec(budget=Budget(max_steps=30)), hook)

    assert result.state is TrialState.NOT_REACHED
    assert [m.step for m in seen] == [0, 10, 20, 30]
    assert all(a is b for a, b in zip(seen, result.curve, strict=True))


@pytest.mark.slow
def test_hook_returning_false_prunes(run) -> None:
    seen: list[int] = []

    def hook(m: Measurement) -> bool:
        seen.append(m.step)
        return m.step < 20

    result = run(tabular_spec(budget=Budget(max_steps=1000)), hook)

    assert result.state is TrialState.PRUNED
    assert seen == [0, 10, 20]
    assert steps(result) == [0, 10, 20]
    assert result.steps_run == 20
    assert result.steps_to_target is None


# Determinism


@pytest.mark.slow
def test_same_seed_gives_identical_curves(run) -> None:
    first = run(tabular_spec(seed=3))
    second = run(tabular_spec(seed=3))

    np.testing.assert_array_equal(numbers(first), numbers(second))


@pytest.mark.slow
def test_different_seeds_give_different_curves(run) -> None:
    first = run(tabular_spec(seed=3))
    other = run(tabular_spec(seed=4))

    assert numbers(first).shape == numbers(other).shape
    assert not np.array_equal(numbers(first), numbers(other), equal_nan=True)


# Training time: one trace, made before the clock starts; the clock covers training calls only

STEP_COST, TRACE_COST, EVAL_COST = 1.0, 1000.0, 1e6  # fake seconds (exact in binary)


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """A training clock that charges STEP_COST per step, TRACE_COST per trace of the training
    function and EVAL_COST per evaluation, whenever they happen (compiling, warming up, in a
    timed call); returns the training calls as (steps, traces before, traces after), the
    warm-up first.
    """
    now = [0.0]
    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    run_real, evaluate_real = session_module.Session.run, session_module.Session.evaluate

    def run_charged(self: session_module.Session, args: tuple) -> tuple[np.ndarray, Any]:
        before = self.train_function.experimental_get_tracing_count()
        losses, stats = run_real(self, args)
        after = self.train_function.experimental_get_tracing_count()
        now[0] += STEP_COST * len(losses) + TRACE_COST * (after - before)
        calls.append((len(losses), before, after))
        return losses, stats

    def evaluate_charged(self: session_module.Session) -> dict[str, float]:
        now[0] += EVAL_COST
        return evaluate_real(self)

    monkeypatch.setattr(session_module.Session, "run", run_charged)
    monkeypatch.setattr(session_module.Session, "evaluate", evaluate_charged)
    return calls


@pytest.mark.slow
def test_one_trace_before_the_clock_serves_every_chunk_length(run, fake_clock) -> None:
    result = run(tabular_spec(cadence=EvalCadence.parse("geometric:1.25"), budget=Budget(300)))

    warm_up, *timed = fake_clock
    assert warm_up == (1, 1, 1)  # traced once while compiling, then run untimed
    assert all(before == after == 1 for _, before, after in timed)
    lengths = [count for count, _, _ in timed]
    assert len(set(lengths)) >= 10  # 1, 2, 3, 4, 5, 6, 8, ... 60: many shapes, one trace
    assert sum(lengths) == result.steps_run == 300


@pytest.mark.slow
@pytest.mark.parametrize("cadence", ["geometric:1.05", "geometric:1.5", "7"])
def test_training_seconds_count_steps_only(run, fake_clock, cadence: str) -> None:
    """With a clock charging 1 s per step, every interval costs exactly 1 s per step: tracing,
    the warm-up step and evaluation never reach the training clock."""
    result = run(tabular_spec(cadence=EvalCadence.parse(cadence), budget=Budget(200)))

    assert [m.train_seconds for m in result.curve] == [STEP_COST * m.step for m in result.curve]
    assert result.train_seconds == STEP_COST * result.steps_run == 200.0
    check_curve_bookkeeping(result, BATCH)
    assert result.timings["train"] == result.train_seconds
    assert result.timings["evaluate"] == EVAL_COST * len(result.curve)


# Optimizers


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "lr"), [("sgd", 0.3), ("momentum", 0.1), ("nesterov", 0.1), ("adam", 0.01)]
)
def test_every_optimizer_trains_to_target(run, name: str, lr: float) -> None:
    spec = tabular_spec(
        optimizer=OptimizerSpec(name=name, learning_rate=lr),
        target=Target.parse("val_accuracy>=0.85"),
        budget=Budget(max_steps=1500),
        cadence=EvalCadence(kind="fixed", every=20),
    )
    result = run(spec)

    assert result.state is TrialState.REACHED, result.curve[-1]
    losses = [m.train_loss for m in result.curve[1:]]
    assert all(math.isfinite(x) for x in losses)
    assert result.curve[-1].metrics["val_loss"] < result.curve[0].metrics["val_loss"]


@pytest.mark.parametrize(
    ("name", "momentum", "nesterov"),
    [("sgd", 0.0, False), ("momentum", 0.8, False), ("nesterov", 0.8, True)],
)
def test_make_optimizer_sgd_family(name: str, momentum: float, nesterov: bool) -> None:
    opt = make_optimizer(
        OptimizerSpec(name=name, learning_rate=0.2, momentum=0.8), ScheduleSpec(), 100
    )

    config = opt.get_config()
    assert type(opt).__name__ == "SGD"
    assert config["momentum"] == pytest.approx(momentum)
    assert config["nesterov"] is nesterov
    assert config["learning_rate"] == pytest.approx(0.2)
    assert config["weight_decay"] is None


def test_make_optimizer_adam_and_weight_decay() -> None:
    spec = OptimizerSpec(
        name="adam", learning_rate=0.01, beta1=0.8, beta2=0.99, epsilon=1e-6, weight_decay=1e-4
    )
    config = make_optimizer(spec, ScheduleSpec(), 100).get_config()

    assert config["beta_1"] == pytest.approx(0.8)
    assert config["beta_2"] == pytest.approx(0.99)
    assert config["epsilon"] == pytest.approx(1e-6)
    assert config["weight_decay"] == pytest.approx(1e-4)
    assert config["learning_rate"] == pytest.approx(0.01)


# Learning-rate schedules


def rates(schedule: WarmupDecay, points: list[int]) -> list[float]:
    return [float(schedule(step)) for step in points]


def test_warmup_decay_docstring_example() -> None:
    schedule = WarmupDecay(0.1, "linear", warmup_steps=10, decay_steps=100, end_factor=0.0)

    assert rates(schedule, [0, 9, 60, 110, 500]) == pytest.approx(
        [0.01, 0.1, 0.05, 0.0, 0.0], abs=1e-7
    )


def test_warmup_ramps_linearly_then_holds() -> None:
    schedule = WarmupDecay(0.4, "constant", warmup_steps=4, decay_steps=10, end_factor=0.0)

    assert rates(schedule, [0, 1, 2, 3, 4, 100]) == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.4, 0.4], rel=1e-6
    )


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_decay_reaches_end_factor_times_base(kind: str) -> None:
    schedule = WarmupDecay(0.5, kind, warmup_steps=0, decay_steps=200, end_factor=0.1)

    assert float(schedule(0)) == pytest.approx(0.5, rel=1e-6)
    assert float(schedule(200)) == pytest.approx(0.05, rel=1e-5)
    assert float(schedule(10_000)) == pytest.approx(0.05, rel=1e-5)
    values = rates(schedule, list(range(0, 201, 10)))
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_linear_and_cosine_midpoints() -> None:
    linear = WarmupDecay(1.0, "linear", warmup_steps=0, decay_steps=100, end_factor=0.2)
    cosine = WarmupDecay(1.0, "cosine", warmup_steps=0, decay_steps=100, end_factor=0.2)

    assert float(linear(50)) == pytest.approx(0.6, rel=1e-6)
    assert float(cosine(50)) == pytest.approx(0.6, rel=1e-6)  # cos(pi/2) = 0: halfway too
    assert float(linear(25)) == pytest.approx(0.8, rel=1e-6)
    assert float(cosine(25)) == pytest.approx(0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi / 4)))


def test_decay_starts_after_warmup() -> None:
    schedule = WarmupDecay(1.0, "cosine", warmup_steps=10, decay_steps=40, end_factor=0.0)

    assert float(schedule(10)) == pytest.approx(1.0, rel=1e-6)
    assert float(schedule(30)) == pytest.approx(0.5, rel=1e-6)
    assert float(schedule(50)) == pytest.approx(0.0, abs=1e-7)


def test_learning_rate_constant_without_warmup_is_a_float() -> None:
    assert learning_rate(OptimizerSpec(learning_rate=0.3), ScheduleSpec(), 100) == 0.3


@pytest.mark.parametrize(
    ("schedule", "step_limit", "horizon"),
    [
        (ScheduleSpec(name="linear", warmup_steps=10), 110, 100),
        (ScheduleSpec(name="linear", warmup_steps=10, decay_steps=40), 110, 40),
        (ScheduleSpec(name="cosine"), None, 10_000),
        (ScheduleSpec(name="constant", warmup_steps=5), 50, 45),
    ],
)
def test_learning_rate_decays_until_the_step_budget(
    schedule: ScheduleSpec, step_limit: int | None, horizon: int
) -> None:
    lr = learning_rate(OptimizerSpec(learning_rate=0.3), schedule, step_limit)

    assert isinstance(lr, WarmupDecay)
    assert lr.base == 0.3
    assert lr.kind == schedule.name
    assert lr.warmup_steps == schedule.warmup_steps
    assert lr.decay_steps == horizon


def test_resolved_schedule_docstring_example() -> None:
    assert resolved_schedule(ScheduleSpec(name="linear", warmup_steps=10), 110) == (
        "linear",
        10,
        100,
        0.0,
    )
    assert resolved_schedule(ScheduleSpec(), 110) is None
    assert resolved_schedule(ScheduleSpec(name="cosine", decay_steps=7), None)[2] == 7


@pytest.mark.parametrize("loss_scale", [False, True])
def test_set_learning_rate_changes_a_rate_and_a_schedules_base(loss_scale: bool) -> None:
    constant = make_optimizer(
        OptimizerSpec(learning_rate=0.1), ScheduleSpec(), 100, loss_scale=loss_scale
    )
    decay = ScheduleSpec(name="linear", warmup_steps=0, end_factor=0.0)
    scheduled = make_optimizer(OptimizerSpec(learning_rate=0.1), decay, 100, loss_scale=loss_scale)

    set_learning_rate(constant, 0.4)
    set_learning_rate(scheduled, 0.4)

    assert float(constant.learning_rate) == pytest.approx(0.4)
    assert float(scheduled.learning_rate) == pytest.approx(0.4)  # step 0 of the decay
    inner = scheduled.inner_optimizer if loss_scale else scheduled
    assert float(inner._learning_rate(50)) == pytest.approx(0.2)
    assert inner._learning_rate.get_config()["base"] == 0.4


@pytest.mark.slow
def test_schedule_drives_the_optimizer_during_training(run) -> None:
    schedule = ScheduleSpec(name="linear", warmup_steps=0, end_factor=0.0)
    # Same seed and data: the curves agree at step 0 and part once the rate decays.
    decayed = run(tabular_spec(schedule=schedule, budget=Budget(max_steps=40)))
    constant = run(tabular_spec(budget=Budget(max_steps=40)))

    assert not np.array_equal(numbers(decayed), numbers(constant), equal_nan=True)
    np.testing.assert_array_equal(numbers(decayed)[:1], numbers(constant)[:1])


# The example stream


@pytest.mark.parametrize("batch_size", [1, 7, 64, 999, 1000, 2500])
def test_index_stream_visits_every_example_once_per_epoch(batch_size: int) -> None:
    n, epochs = 1000, 3
    stream = IndexStream(n, seed=5)
    batches = [stream.take(batch_size) for _ in range(math.ceil(epochs * n / batch_size))]

    assert all(b.shape == (batch_size,) and b.dtype == np.int32 for b in batches)
    flat = np.concatenate(batches)[: epochs * n]
    orders = flat.reshape(epochs, n)
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(n))
    assert not np.array_equal(orders[0], orders[1])  # a fresh permutation each epoch


def test_index_stream_is_seeded() -> None:
    a, b, c = IndexStream(100, seed=1), IndexStream(100, seed=1), IndexStream(100, seed=2)

    np.testing.assert_array_equal(a.take(250), b.take(250))
    assert not np.array_equal(IndexStream(100, seed=1).take(100), c.take(100))
