"""Reusing a trial's session: a reused trial gives exactly the curve of the same trial run
fresh (dropout, a schedule and a new learning rate included), only trials with the same traces
share a session, and the timings say where the time went."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest

from study.config.trial import Budget, OptimizerSpec, ScheduleSpec, TrialSpec
from study.results import TrialResult
from study.trainer.loop import train
from study.trainer.session import SessionCache, session_key
from study.workloads import Dataset, get_workload
from study.workloads.task import Task
from tests.fakes import tabular_spec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data() -> Dataset:
    return get_workload("tabular", {"rows": 2000}).load()


def dropout_mlp(data: Dataset) -> keras.Model:
    """Dense layers with dropout: the dropout seed state is among the model's variables."""
    return keras.Sequential(
        [
            keras.Input(data.input_shape),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(data.num_classes),
        ]
    )


def run(spec: TrialSpec, data: Dataset, strategy: Any, cache: Any = None) -> TrialResult:
    return train(spec, data, lambda: dropout_mlp(data), *strategy, cache=cache)


def numbers(result: TrialResult) -> list[tuple]:
    return [(m.step, m.train_loss, *m.metrics.values()) for m in result.curve[1:]]


@pytest.mark.parametrize(
    "schedule",
    [ScheduleSpec(), ScheduleSpec(name="cosine", warmup_steps=5, end_factor=0.1)],
    ids=["constant", "warmup-cosine"],
)
def test_reused_trial_gives_the_fresh_curve(data: Dataset, default_strategy, schedule) -> None:
    a = tabular_spec(seed=1, schedule=schedule, optimizer=OptimizerSpec(learning_rate=0.05))
    b = tabular_spec(seed=2, schedule=schedule, optimizer=OptimizerSpec(learning_rate=0.2))
    cache = SessionCache()
    run(a, data, default_strategy, cache)
    reused = run(b, data, default_strategy, cache)
    fresh = run(b, data, default_strategy)

    assert reused.environment["reused"] is True
    assert fresh.environment["reused"] is False
    assert numbers(reused) == numbers(fresh)
    assert reused.curve[0].metrics == fresh.curve[0].metrics
    assert numbers(reused) != numbers(run(a, data, default_strategy))  # rate and seed matter


def test_dropout_seed_state_is_a_model_variable(data: Dataset) -> None:
    """Why the re-initialisation covers dropout: Keras keeps the seed state in variables."""
    model = dropout_mlp(data)
    assert sum("seed_generator_state" in v.path for v in model.variables) == 2


def test_only_trials_with_the_same_traces_share_a_session(data: Dataset, default_strategy) -> None:
    cache = SessionCache()
    first = run(tabular_spec(), data, default_strategy, cache)
    changes = {
        "learning rate": tabular_spec(optimizer=OptimizerSpec(learning_rate=0.3)),
        "seed": tabular_spec(seed=9),
        "budget": tabular_spec(budget=Budget(max_steps=20)),  # constant rate: same traces
        "batch size": tabular_spec(batch_size=32),
        "momentum": tabular_spec(batch_size=32, optimizer=OptimizerSpec(momentum=0.5)),
    }
    reused = {name: run(spec, data, default_strategy, cache) for name, spec in changes.items()}

    assert first.environment["reused"] is False
    assert {k: r.environment["reused"] for k, r in reused.items()} == {
        "learning rate": True,
        "seed": True,
        "budget": True,
        "batch size": True,  # data in memory: one trace takes any batch size
        "momentum": False,
    }


def test_session_key_leaves_out_only_what_is_set_per_trial() -> None:
    task = Task.multiclass()
    base = session_key(tabular_spec(), task)
    decay = ScheduleSpec(name="linear")

    assert (
        session_key(tabular_spec(seed=4, optimizer=OptimizerSpec(learning_rate=1.0)), task) == base
    )
    assert session_key(tabular_spec(optimizer=OptimizerSpec(weight_decay=1e-4)), task) != base
    assert session_key(tabular_spec(precision="mixed_bfloat16"), task) != base
    assert session_key(tabular_spec(jit_compile="on"), task) != base
    assert session_key(tabular_spec(strategy="mirrored:2"), task) != base
    assert session_key(tabular_spec(loss="sparse_categorical_crossentropy"), task) != base
    assert session_key(tabular_spec(), Task.binary()) != base
    # In memory one trace takes any batch size; a streamed pipeline batches, so it counts there.
    assert session_key(tabular_spec(batch_size=32), task) == base
    assert session_key(tabular_spec(batch_size=32), task, streamed=True) != session_key(
        tabular_spec(), task, streamed=True
    )
    # A decaying schedule's horizon is the step budget: then the budget is baked in.
    assert session_key(tabular_spec(schedule=decay, budget=Budget(20)), task) != session_key(
        tabular_spec(schedule=decay, budget=Budget(30)), task
    )


def test_timings_split_a_fresh_and_a_reused_trial(data: Dataset, default_strategy) -> None:
    cache = SessionCache()
    fresh = run(tabular_spec(), data, default_strategy, cache)
    reused = run(tabular_spec(seed=5), data, default_strategy, cache)

    for result in (fresh, reused):
        assert set(result.timings) == {"build", "trace", "train", "evaluate", "replay"}
        assert result.timings["train"] == result.train_seconds
        assert all(v >= 0 for v in result.timings.values())
        assert result.timings["evaluate"] > 0
    assert fresh.timings["trace"] > 0 and reused.timings["trace"] == 0.0
    assert reused.timings["build"] < fresh.timings["build"] + fresh.timings["trace"]
    assert np.isfinite(reused.curve[-1].metrics["val_loss"])


def test_batch_sizes_share_one_session_with_fresh_results(data: Dataset, default_strategy) -> None:
    """A study alternates batch sizes in one worker: in memory they share one trace, and each
    trial's curve is exactly that of a fresh session at its batch size."""
    cache = SessionCache(capacity=2)
    order = [128, 32, 128, 48]
    results = [
        run(tabular_spec(batch_size=b, seed=i), data, default_strategy, cache)
        for i, b in enumerate(order)
    ]
    assert [r.environment["reused"] for r in results] == [False, True, True, True]
    assert len(cache) == 1
    assert results[1].timings["trace"] == 0.0
    for i in (1, 3):
        fresh = run(tabular_spec(batch_size=order[i], seed=i), data, default_strategy)
        assert numbers(results[i]) == numbers(fresh)


def test_alternating_strata_reuse_their_own_sessions(data: Dataset, default_strategy) -> None:
    """Strata whose traces differ (here the loss) each come back to their kept session."""
    cache = SessionCache(capacity=2)
    losses = [None, "sparse_categorical_crossentropy", None, "sparse_categorical_crossentropy"]
    results = [
        run(tabular_spec(loss=loss, seed=i), data, default_strategy, cache)
        for i, loss in enumerate(losses)
    ]
    assert [r.environment["reused"] for r in results] == [False, False, True, True]
    assert len(cache) == 2


def test_the_least_recently_used_session_goes_first(data: Dataset, default_strategy) -> None:
    cache = SessionCache(capacity=1)
    decays = [0.0, 1e-4, 0.0]
    specs = [
        tabular_spec(optimizer=OptimizerSpec(name="nesterov", learning_rate=0.1, weight_decay=d))
        for d in decays
    ]
    results = [run(spec, data, default_strategy, cache) for spec in specs]
    assert [r.environment["reused"] for r in results] == [False, False, False]
    assert len(cache) == 1 and cache.session is not None
    assert cache.session.key == session_key(specs[2], Task.multiclass())


def _opened(data: Dataset, strategy: Any) -> Any:
    from study.trainer.session import open_session

    spec = tabular_spec(seed=3)
    session, _, _ = open_session(
        spec, data, lambda: dropout_mlp(data), *strategy, Task.multiclass(), SessionCache()
    )
    session.start(spec.settings.seed)
    return session


def _state(session: Any) -> list[np.ndarray]:
    return [v.numpy() for v in list(session.model.variables) + list(session.optimizer.variables)]


def test_a_snapshot_reads_every_variable_in_one_call_and_keeps_them(
    data: Dataset, default_strategy
) -> None:
    session = _opened(data, default_strategy)
    session.run(session.args(5))
    values, position = session.snapshot()
    kept = [v.copy() for v in values]
    expected = _state(session)
    assert session.reader not in (None, False)  # the compiled read was used
    assert [(v.dtype, v.tobytes()) for v in values] == [(v.dtype, v.tobytes()) for v in expected]

    session.run(session.args(20))  # training on does not touch what was taken
    assert [v.tobytes() for v in values] == [v.tobytes() for v in kept]
    assert [v.tobytes() for v in _state(session)] != [v.tobytes() for v in kept]
    session.restore((values, position))
    assert [v.tobytes() for v in _state(session)] == [v.tobytes() for v in kept]


def test_a_snapshot_reads_variables_one_by_one_where_it_cannot_compile(
    data: Dataset, default_strategy
) -> None:
    session = _opened(data, default_strategy)
    session.reader = False  # what a variable kind that does not trace leaves
    values, _ = session.snapshot()
    assert [v.tobytes() for v in values] == [v.tobytes() for v in _state(session)]
