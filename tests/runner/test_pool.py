"""Tests for study.runner.pool: trials in spawned worker processes keyed by device configuration.

One pool serves the whole module (each worker imports TensorFlow once, ~4 s): the first trials
run `default` twice and then `mirrored:2` (two logical CPUs, so a second worker), and the other
tests reuse the `default` worker.
"""

from __future__ import annotations

import math
import os
import signal
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from study.config.hold import DEFAULT_HOLD
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.runner import WorkerPool, spawning
from study.runner.step_limit import StepLimit
from study.strategies import tpu_hint
from tests.fakes import tabular_spec
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

LOSS_RTOL = 1e-5
FAILING_WORKLOAD = """
    from study.workloads.base import Workload


    class Exploding(Workload):
        name = "exploding"

        def load(self):
            raise RuntimeError("exploding workload: load() failed on purpose")

        def build_model(self, model, data):
            raise AssertionError("never called: load() raises first")
"""
STREAMED_WORKLOAD = """
    from study.workloads.base import Streams
    from study.workloads.tabular import TabularWorkload


    class StreamedTabular(TabularWorkload):
        name = "streamed_tabular"

        def load(self):
            import tensorflow as tf

            data = super().load()

            def train(seed, num_shards, shard_index):
                examples = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
                examples = examples.shard(num_shards, shard_index)
                return examples.shuffle(len(data.y_train), seed=seed)

            def val():
                return tf.data.Dataset.from_tensor_slices((data.x_val, data.y_val))

            shape, outputs = data.input_shape, data.num_classes
            return Streams(train, val, shape, outputs, len(data.y_train), len(data.y_val))
"""
USER_MODEL = """
    import keras


    def compiled(input_shape, outputs):
        model = keras.Sequential(
            [
                keras.Input(input_shape),
                keras.layers.Dense(32, activation="relu"),
                keras.layers.Dense(outputs),
            ]
        )
        model.compile(
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseTopKCategoricalAccuracy(k=1, name="top1")],
        )
        return model
"""


def make_spec(strategy: str = "default", **changes: Any) -> TrialSpec:
    """The shared tabular spec (`tests.fakes.tabular_spec`) on ``strategy``, seed 7."""
    return tabular_spec(strategy=strategy, seed=7, **changes)


@pytest.fixture(scope="module")
def user_modules(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """Custom modules the workers import, in one directory: a workload whose load() raises,
    a streamed workload and a compiled user model; their ``module:callable`` by role."""
    directory = tmp_path_factory.mktemp("workloads")
    tag = uuid.uuid4().hex[:8]
    names: dict[str, str] = {}
    for role, text, attr in [
        ("exploding", FAILING_WORKLOAD, "Exploding"),
        ("streamed", STREAMED_WORKLOAD, "StreamedTabular"),
        ("model", USER_MODEL, "compiled"),
    ]:
        module = f"{role}_module_{tag}"
        (directory / f"{module}.py").write_text(textwrap.dedent(text), encoding="utf-8")
        names[role] = f"{module}:{attr}"
    return directory, names


@pytest.fixture(scope="module")
def failing_workload(user_modules: tuple[Path, dict[str, str]]) -> tuple[Path, str]:
    """A custom workload module whose load() raises: its directory and ``module:callable``."""
    return user_modules[0], user_modules[1]["exploding"]


@pytest.fixture(scope="module")
def pool(failing_workload: tuple[Path, str]) -> Iterator[WorkerPool]:
    """Two worker slots; workers see the custom workload's directory on ``sys.path``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(failing_workload[0]))  # spawned workers inherit sys.path
        with WorkerPool(max_workers=2) as workers:
            yield workers


@dataclass(frozen=True)
class Equivalence:
    default: TrialResult
    default_again: TrialResult
    mirrored: TrialResult
    started: tuple[int, int, int]  # pool.started after each of the three trials


@pytest.fixture(scope="module")
def equivalence(pool: WorkerPool) -> Equivalence:
    """The same global batch, seed and rate on ``default`` (twice), then on ``mirrored:2``."""
    spec = make_spec(budget=Budget(max_steps=100))
    default = pool.run(spec)
    after_first = pool.started
    default_again = pool.run(spec)
    after_second = pool.started
    mirrored = pool.run(make_spec("mirrored:2", budget=Budget(max_steps=100)))
    return Equivalence(default, default_again, mirrored, (after_first, after_second, pool.started))


def relative_difference(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


def test_default_and_mirrored_give_the_same_loss_curve(equivalence: Equivalence) -> None:
    default, mirrored = equivalence.default, equivalence.mirrored
    assert default.state is TrialState.NOT_REACHED, default.error
    assert mirrored.state is TrialState.NOT_REACHED, mirrored.error
    assert mirrored.environment["replicas"] == 2
    assert mirrored.environment["per_replica_batch"] == 32
    assert mirrored.environment["strategy"] == "mirrored"
    assert default.environment["replicas"] == 1
    assert default.environment["per_replica_batch"] == 64
    assert [m.step for m in default.curve] == list(range(0, 101, 10))
    assert [m.step for m in mirrored.curve] == [m.step for m in default.curve]

    assert math.isnan(default.curve[0].train_loss) and math.isnan(mirrored.curve[0].train_loss)
    worst = 0.0
    for d, m in zip(default.curve, mirrored.curve, strict=True):
        pairs = [(d.metrics["val_loss"], m.metrics["val_loss"])]
        if d.step:
            pairs.append((d.train_loss, m.train_loss))
        for a, b in pairs:
            assert b == pytest.approx(a, rel=LOSS_RTOL), f"step {d.step}"
            worst = max(worst, relative_difference(a, b))
        assert abs(d.metrics["val_accuracy"] - m.metrics["val_accuracy"]) <= 1 / 400 + 1e-9
    # The curve must actually move, or equal curves would prove nothing.
    assert default.curve[-1].metrics["val_loss"] < 0.95 * default.curve[0].metrics["val_loss"]
    print(f"max relative loss difference default vs mirrored:2: {worst:.3g}")


def test_worker_is_reused_per_device_configuration(equivalence: Equivalence) -> None:
    first, second, third = equivalence.started
    assert first >= 1
    assert second == first  # the second default trial ran in the same worker
    assert third == second + 1  # mirrored:2 needs two logical CPUs: a new worker


def test_reused_worker_repeats_a_trial_exactly(equivalence: Equivalence) -> None:
    a, b = equivalence.default.curve, equivalence.default_again.curve
    assert [m.step for m in a] == [m.step for m in b]
    assert [m.train_loss for m in a[1:]] == [m.train_loss for m in b[1:]]
    assert [dict(m.metrics) for m in a] == [dict(m.metrics) for m in b]


def test_a_replay_on_mirrored_gives_the_every_step_runs_evaluations(pool: WorkerPool) -> None:
    """Exact steps on ``mirrored:2``: the replayed steps, trained and evaluated in one compiled
    call (`study.trainer.replay`), are those of a run that evaluates every step, to the bit."""
    noisy = {
        "batch_size": 16,
        "optimizer": OptimizerSpec("nesterov", 0.1),
        "target": replace(Target.parse("val_accuracy>=0.8"), hold=DEFAULT_HOLD),
        "budget": Budget(max_steps=600),
    }
    exact = pool.run(make_spec("mirrored:2", cadence=EvalCadence.parse("geometric:1.05"), **noisy))
    every = pool.run(make_spec("mirrored:2", cadence=EvalCadence.parse("1"), **noisy))
    assert exact.state is every.state is TrialState.REACHED, (exact.error, every.error)
    assert exact.steps_to_target == every.steps_to_target
    fine = [m for m in exact.curve if m.fine]
    assert len(fine) > 1 and exact.environment["replay_steps"] == len(fine)
    by_step = {m.step: m for m in every.curve}
    assert [(m.train_loss, dict(m.metrics)) for m in fine] == [
        (by_step[m.step].train_loss, dict(by_step[m.step].metrics)) for m in fine
    ]


def test_a_worker_outlives_the_thread_that_started_it() -> None:
    """Linux's parent-death signal follows the thread that started a worker: a study's trial
    thread that ran out of work must not take down the worker a peer thread goes on using."""
    with WorkerPool(max_workers=1) as workers:
        problems: list[str | None] = []
        starter = threading.Thread(target=lambda: problems.append(workers.check(make_spec())))
        starter.start()
        starter.join()
        assert problems == [None]
        started = workers.pids()
        result = workers.run(make_spec())
        assert result.state not in (TrialState.FAILED, TrialState.INFEASIBLE), result.error
        assert workers.pids() == started and workers.started == 1


def test_prestarted_workers_serve_the_trials_of_every_thread() -> None:
    """``prestart`` after a preflight's check starts the other slots' workers, checked and idle:
    two trials at once then run on them, no worker started inside a trial."""
    with WorkerPool(max_workers=2) as workers:
        assert workers.check(make_spec()) is None
        for thread in workers.prestart(make_spec()):
            thread.join(120)
        assert workers.started == 2
        assert [w.busy for w in workers._workers] == [False, False]
        assert workers.prestart(make_spec()) == []  # no room left
        results: list[TrialResult] = []
        threads = [threading.Thread(target=lambda: results.append(workers.run(make_spec())))
                   for _ in range(2)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert all(r.state not in (TrialState.FAILED, TrialState.INFEASIBLE) for r in results)
        assert len(results) == 2
        assert workers.started == 2


def test_a_prestart_on_a_closed_pool_or_a_worker_group_starts_nothing() -> None:
    workers = WorkerPool(max_workers=2)
    workers.close()
    for thread in workers.prestart(make_spec()):
        thread.join(60)
    assert workers.started == 0
    assert WorkerPool(max_workers=2).prestart(make_spec("multi_worker_mirrored:2")) == []


def die_at_start(conn: Any, *args: Any) -> None:
    """A worker's entry point that ends before it says it is ready."""
    os._exit(3)


def test_a_worker_that_dies_while_starting_fails_the_trial_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("study.runner.worker.worker_main", die_at_start)
    with WorkerPool(max_workers=1) as workers:
        result = workers.run(make_spec())
        problem = workers.check(make_spec())
    assert result.state is TrialState.FAILED
    assert result.error == "trainer worker for cpu1 died while starting (exit code 3)"
    assert problem == result.error


def idle_worker(conn: Any, *args: Any) -> None:
    """A worker's entry point that says it is ready and waits, ignoring SIGTERM as a real
    worker does, until it is told to exit."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    conn.send(("ready", {}))
    while conn.recv()[0] != "exit":
        pass


def test_a_worker_still_starting_when_the_pool_closes_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C or SIGTERM closes the pool while a trial thread may be starting a worker: that
    worker is stopped as it comes up and the trial fails (the engine records it interrupted).
    Kept, it would hang the host's exit: `multiprocessing` terminates and joins every live
    child there, and a worker ignores SIGTERM."""
    monkeypatch.setattr("study.runner.worker.worker_main", idle_worker)
    started: list[Any] = []
    closed = threading.Event()

    def start_then_wait(process: Any) -> None:
        real_start(process)
        started.append(process)
        closed.wait(60)

    real_start = spawning.start
    monkeypatch.setattr(spawning, "start", start_then_wait)
    workers = WorkerPool(max_workers=1)
    results: list[TrialResult] = []
    trial = threading.Thread(target=lambda: results.append(workers.run(make_spec())))
    trial.start()
    wait_until(lambda: started, 60, "the worker to be started")
    workers.close()
    closed.set()
    trial.join(60)
    assert [r.state for r in results] == [TrialState.FAILED]
    assert results[0].error == "the worker pool is closed (the run is stopping)"
    started[0].join(10)
    assert not started[0].is_alive() and workers.pids() == {}
    assert workers.run(make_spec()).error == results[0].error  # nothing starts after close


def test_strategy_the_host_lacks_is_infeasible(pool: WorkerPool) -> None:
    if tpu_hint():
        pytest.skip("this host looks like it has a TPU")
    result = pool.run(make_spec("tpu"))

    assert result.state is TrialState.INFEASIBLE
    assert "'tpu'" in result.error
    assert "needs a TPU" in result.error
    assert "detected 0 GPU(s), no TPU" in result.error
    assert result.curve == ()

    started = pool.started
    after = pool.run(make_spec())
    assert after.state is TrialState.NOT_REACHED, after.error
    assert after.steps_run == 30
    assert pool.started == started  # the same worker carried on


def test_workload_that_raises_fails_the_trial_only(
    pool: WorkerPool, failing_workload: tuple[Path, str]
) -> None:
    result = pool.run(make_spec(workload=failing_workload[1], workload_options={}))

    assert result.state is TrialState.FAILED
    assert result.error.startswith("Traceback (most recent call last)")
    assert "in load" in result.error
    assert "RuntimeError: exploding workload: load() failed on purpose" in result.error

    started = pool.started
    after = pool.run(make_spec())
    assert after.state is TrialState.NOT_REACHED, after.error
    assert after.steps_run == 30
    assert pool.started == started  # a failed trial does not cost the worker


def test_hook_gets_measurements_across_processes_and_can_prune(pool: WorkerPool) -> None:
    seen: list[Measurement] = []

    def hook(m: Measurement) -> bool:
        seen.append(m)
        return m.step < 20

    result = pool.run(make_spec(budget=Budget(max_steps=1000)), hook)

    assert result.state is TrialState.PRUNED
    assert result.steps_run == 20
    assert all(isinstance(m, Measurement) for m in seen)
    assert [m.step for m in seen] == [0, 10, 20]
    assert [m.step for m in result.curve] == [0, 10, 20]
    assert seen[1:] == list(result.curve[1:])  # step 0 has a NaN train loss (NaN != NaN)
    assert seen[0].metrics == result.curve[0].metrics


def test_hook_that_keeps_going_sees_the_whole_curve(pool: WorkerPool) -> None:
    steps: list[int] = []

    def hook(m: Measurement) -> bool:
        steps.append(m.step)
        return True

    result = pool.run(make_spec(), hook)

    assert result.state is TrialState.NOT_REACHED
    assert steps == [m.step for m in result.curve] == [0, 10, 20, 30]


def test_a_step_limit_prunes_in_the_worker_as_the_hook_did(pool: WorkerPool) -> None:
    asked = pool.run(make_spec(budget=Budget(max_steps=1000)), lambda m: m.step < 20)
    limited = pool.run(make_spec(budget=Budget(max_steps=1000)), StepLimit(lambda: 20.0))

    assert limited.state is asked.state is TrialState.PRUNED
    assert limited.steps_run == asked.steps_run == 20
    same = [(m.step, m.train_loss, m.metrics) for m in limited.curve[1:]]
    assert same == [(m.step, m.train_loss, m.metrics) for m in asked.curve[1:]]


def test_a_limit_that_moves_reaches_the_running_trial(pool: WorkerPool) -> None:
    """The parent sends a moved limit while the trial trains; a late one, sent as the trial
    ended, does not reach the next trial."""
    started = time.monotonic()

    def falls_after_a_while() -> float:  # moves on every read until it falls
        return 20.0 if time.monotonic() - started > 0.5 else 1e9 + time.monotonic()

    long = make_spec(budget=Budget(max_steps=200_000))
    result = pool.run(long, StepLimit(falls_after_a_while))
    following = pool.run(make_spec(budget=Budget(max_steps=1000)), StepLimit(lambda: 30.0))

    assert result.state is TrialState.PRUNED
    assert result.steps_run < 200_000
    assert following.state is TrialState.PRUNED and following.steps_run == 30


# The streamed input path and a compiled user model, on both strategies


@pytest.fixture(scope="module")
def streamed(pool: WorkerPool, user_modules: tuple[Path, dict[str, str]]) -> dict[str, Any]:
    """The streamed workload and the compiled user model, each on default and mirrored:2."""
    names = user_modules[1]
    out: dict[str, Any] = {}
    for strategy in ("default", "mirrored:2"):
        out[f"streams {strategy}"] = pool.run(
            make_spec(strategy, workload=names["streamed"], budget=Budget(max_steps=100))
        )
        out[f"model {strategy}"] = pool.run(
            make_spec(strategy, model=names["model"], budget=Budget(max_steps=50))
        )
    return out


@pytest.mark.parametrize("kind", ["streams", "model"])
def test_default_and_mirrored_agree_on_streams_and_user_models(
    streamed: dict[str, Any], kind: str
) -> None:
    default, mirrored = streamed[f"{kind} default"], streamed[f"{kind} mirrored:2"]
    assert default.state is TrialState.NOT_REACHED, default.error
    assert mirrored.state is TrialState.NOT_REACHED, mirrored.error
    assert default.environment["input"] == ("streamed" if kind == "streams" else "memory")
    assert mirrored.environment["replicas"] == 2
    keys = ("val_loss", "val_accuracy", "val_error") + (("val_top1",) if kind == "model" else ())
    assert tuple(default.curve[0].metrics) == keys

    for d, m in zip(default.curve, mirrored.curve, strict=True):
        assert m.step == d.step
        for key in keys:
            assert m.metrics[key] == pytest.approx(d.metrics[key], rel=LOSS_RTOL), (d.step, key)
        if d.step:
            assert m.train_loss == pytest.approx(d.train_loss, rel=LOSS_RTOL), d.step
    assert default.curve[-1].metrics["val_loss"] < 0.95 * default.curve[0].metrics["val_loss"]
    if kind == "model":  # top-1 accuracy is accuracy: Keras' metric (float32) over all rows
        for m in default.curve:
            assert m.metrics["val_top1"] == pytest.approx(m.metrics["val_accuracy"], rel=1e-6)


def test_reused_session_gives_the_fresh_curve_on_mirrored(
    pool: WorkerPool, equivalence: Equivalence
) -> None:
    pool.run(tabular_spec(strategy="mirrored:2", seed=8, budget=Budget(max_steps=100)))
    again = pool.run(make_spec("mirrored:2", budget=Budget(max_steps=100)))

    assert equivalence.mirrored.environment["reused"] is False
    assert again.environment["reused"] is True
    assert again.timings["trace"] == 0.0
    assert [m.train_loss for m in again.curve[1:]] == [
        m.train_loss for m in equivalence.mirrored.curve[1:]
    ]
    assert [dict(m.metrics) for m in again.curve] == [
        dict(m.metrics) for m in equivalence.mirrored.curve
    ]


# Preflight: a trial checked in a worker without training


def test_check_accepts_a_good_trial_and_names_every_bad_input(
    pool: WorkerPool, user_modules: tuple[Path, dict[str, str]]
) -> None:
    names = user_modules[1]
    started = pool.started
    problems = {
        "good": pool.check(make_spec()),
        "target": pool.check(make_spec(target=Target.parse("val_auc>=0.9"))),
        "model target": pool.check(
            make_spec(model=names["model"], target=Target.parse("val_top5>=0.9"))
        ),
        "loss": pool.check(make_spec(loss="mse")),
        "loss module": pool.check(make_spec(loss="no_such_loss_module_q:f")),
        "load": pool.check(make_spec(workload=names["exploding"], workload_options={})),
        "batch": pool.check(make_spec("mirrored:2", batch_size=63)),
    }

    assert problems["good"] is None
    assert problems["target"] == (
        "target: unknown metric 'val_auc'; workload 'tabular' reports val_loss, val_accuracy, "
        "val_error"
    )
    assert problems["model target"].endswith("reports val_loss, val_accuracy, val_error, val_top1")
    assert "loss 'mse' does not suit a multiclass task" in problems["loss"]
    assert problems["loss module"].startswith("loss: cannot import module 'no_such_loss_module_q'")
    assert problems["load"] == "RuntimeError: exploding workload: load() failed on purpose"
    assert "63 is not divisible by the 2 replicas" in problems["batch"]
    assert all(p is None or "\n" not in p for p in problems.values())
    assert pool.started == started  # checked in the running workers

    after = pool.run(make_spec())
    assert after.state is TrialState.NOT_REACHED, after.error
