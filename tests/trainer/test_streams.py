"""The streamed input path (`Streams`): same curve as the in-memory path for the same example
order, deterministic for a seed, one trace for every chunk length and trial, epoch semantics
and sharding through the input context. ``mirrored:2`` is compared in tests/runner/test_pool.py.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, TrialSpec
from study.results import TrialResult, TrialState
from study.trainer import inputs
from study.trainer.inputs import StreamFeed
from study.trainer.loop import train
from study.trainer.session import SessionCache
from study.workloads import Dataset, Workload, get_workload
from study.workloads.base import Streams
from study.workloads.task import Task
from tests.fakes import tabular_spec
from tests.trainer.conftest import (
    index_ordered_blocks,
    index_ordered_streams,
    run_script,
    shuffled_blocks,
    shuffled_streams,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tabular() -> tuple[Workload, Dataset]:
    workload = get_workload("tabular", {"rows": 2000})
    return workload, workload.load()


def run(
    spec: TrialSpec, data: Dataset | Streams, tabular, strategy, cache: Any = None
) -> TrialResult:
    workload, arrays = tabular
    return train(spec, data, lambda: workload.build_model("mlp", arrays), *strategy, cache=cache)


def curve(result: TrialResult) -> list[tuple]:
    return [(m.step, m.train_loss, *m.metrics.values()) for m in result.curve[1:]]


@pytest.mark.parametrize("ordered", [index_ordered_streams, index_ordered_blocks])
def test_same_order_gives_the_in_memory_curve_and_steps_to_target(
    tabular, default_strategy, monkeypatch: pytest.MonkeyPatch, ordered: Any
) -> None:
    monkeypatch.setattr(inputs, "_MAX_EVAL_CHUNK", 64)  # 400 validation rows: 7 chunks
    spec = tabular_spec(
        seed=3,
        target=Target.parse("val_accuracy>=0.8"),
        budget=Budget(max_steps=600),
        cadence=EvalCadence.parse("geometric:1.2"),
    )
    memory = run(spec, tabular[1], tabular, default_strategy)
    streamed = run(spec, ordered(tabular[1]), tabular, default_strategy)

    assert memory.environment["input"] == "memory"
    assert streamed.environment["input"] == "streamed"
    assert streamed.state is memory.state is TrialState.REACHED
    assert streamed.steps_to_target == memory.steps_to_target
    np.testing.assert_allclose(curve(streamed), curve(memory), rtol=1e-6)
    assert streamed.curve[0].metrics == pytest.approx(memory.curve[0].metrics, rel=1e-9)


@pytest.mark.parametrize("shuffled", [shuffled_streams, shuffled_blocks])
def test_streamed_trial_is_deterministic_for_a_seed(tabular, default_strategy, shuffled) -> None:
    streams = shuffled(tabular[1])
    first = run(tabular_spec(seed=5), streams, tabular, default_strategy)
    again = run(tabular_spec(seed=5), streams, tabular, default_strategy)
    other = run(tabular_spec(seed=6), streams, tabular, default_strategy)

    assert curve(first) == curve(again)
    assert curve(first) != curve(other)
    assert first.curve[-1].metrics["val_loss"] < first.curve[0].metrics["val_loss"]


def test_one_trace_serves_every_chunk_length_and_the_next_trial(tabular, default_strategy) -> None:
    cache = SessionCache()
    streams = shuffled_streams(tabular[1])
    spec = tabular_spec(cadence=EvalCadence.parse("geometric:1.3"), budget=Budget(80))
    first = run(spec, streams, tabular, default_strategy, cache)
    second = run(spec, streams, tabular, default_strategy, cache)

    steps = [m.step for m in first.curve]
    assert len({b - a for a, b in itertools.pairwise(steps)}) >= 5  # many chunk lengths
    assert second.environment["reused"] is True
    assert cache.session.train_function.experimental_get_tracing_count() == 1
    assert curve(first) == curve(second)


class Recording:
    """A `Streams.train` over example ids 0..n-1 that records how it was called."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, []

    def __call__(self, seed: int, num_shards: int, shard_index: int) -> tf.data.Dataset:
        self.calls.append((seed, num_shards, shard_index))
        ids = tf.data.Dataset.range(self.n).shard(num_shards, shard_index)
        ids = ids.shuffle(self.n, seed=seed, reshuffle_each_iteration=True)
        return ids.map(lambda i: (tf.cast(tf.reshape(i, [1]), tf.float32), i))


def feed(train: Recording, strategy: Any, batch_size: int) -> StreamFeed:
    streams = Streams(
        train=train,
        val=lambda: tf.data.Dataset.from_tensors((tf.zeros([1]), tf.zeros([], tf.int64))),
        input_shape=(1,),
        num_classes=train.n,
        train_examples=train.n,
        val_examples=1,
    )
    return StreamFeed(streams, None, strategy, batch_size)


def test_batches_span_epochs_and_every_epoch_is_a_fresh_order(default_strategy) -> None:
    train = Recording(10)
    dataset = feed(train, default_strategy[0], 4).dataset_fn(seed=9)(tf.distribute.InputContext())
    ids = np.concatenate([y.numpy() for _, y in dataset.take(10)])  # 40 examples: 4 epochs

    assert train.calls == [(9, 1, 0)]
    epochs = ids.reshape(4, 10)
    for epoch in epochs:
        assert sorted(epoch) == list(range(10))
    assert len({tuple(e) for e in epochs}) > 1


def test_each_input_pipeline_reads_its_shard_at_the_per_replica_batch(
    default_strategy,
) -> None:
    train = Recording(12)
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4
    )
    dataset = feed(train, default_strategy[0], 8).dataset_fn(seed=1)(context)
    batches = [y.numpy() for _, y in dataset.take(3)]

    assert train.calls == [(1, 2, 1)]
    assert all(b.shape == (2,) for b in batches)  # global 8 over 4 replicas
    assert set(np.concatenate(batches)) == {1, 3, 5, 7, 9, 11}  # shard 1 of 2


def test_task_labels_are_prepared_in_graph(default_strategy) -> None:
    """A binary task's [n] 0/1 labels reach the loss as float [n, 1] on the streamed path."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    data = Dataset(x[:200], y[:200], x[200:], y[200:], num_classes=1)

    import keras

    def build() -> keras.Model:
        return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])

    spec = tabular_spec(budget=Budget(max_steps=30), target=Target.parse("val_auc>=0.99"))
    result = train(spec, shuffled_streams(data), build, *default_strategy, task=Task.binary())

    assert tuple(result.curve[0].metrics) == Task.binary().keys
    assert result.state is TrialState.REACHED


MIRRORED_SCRIPT = """
import json, sys
import tensorflow as tf
from study.strategies import HostInfo, build_strategy, configure_devices, resolve
configure_devices(tf, 2)
tf.config.experimental.enable_op_determinism()
from study.config.trial import Budget
from study.trainer import inputs
from study.trainer.loop import train
from study.workloads import get_workload
from tests.fakes import tabular_spec
from tests.trainer.conftest import shuffled_blocks, shuffled_streams

workload = get_workload("tabular", {"rows": 2000})
data = workload.load()
resolved = resolve("mirrored:2", HostInfo())
strategy = build_strategy(tf, resolved)
out = {}
for form, streams in (("examples", shuffled_streams), ("blocks", shuffled_blocks)):
    for split in (True, False):
        inputs.shares_host_memory = lambda strategy, split=split: split
        result = train(
            tabular_spec(strategy="mirrored:2", budget=Budget(max_steps=40)),
            streams(data),
            lambda: workload.build_model("mlp", data),
            strategy,
            resolved,
        )
        out[f"{form} {split}"] = [[m.train_loss, m.metrics["val_loss"]] for m in result.curve[1:]]
print(json.dumps(out))
"""


def test_distributed_iterator_and_host_split_agree_on_mirrored() -> None:
    """On two logical CPUs (a subprocess: devices are fixed when TensorFlow starts), the
    distributed iterator and the host-split global batch give the same curve."""
    curves = run_script(MIRRORED_SCRIPT)

    for form in ("examples", "blocks"):
        host, distributed = curves[f"{form} True"], curves[f"{form} False"]
        np.testing.assert_allclose(host, distributed, rtol=1e-5)
        assert host[-1][1] < host[0][1]
