"""Shared set-up for the trainer tests: the default strategy, small task workloads, and numpy
reference implementations of every loss and metric the trainer computes in graph."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from study.strategies import HostInfo, build_strategy, resolve
from study.workloads.base import Dataset, Workload
from study.workloads.blocks import array_blocks
from study.workloads.task import Task


@pytest.fixture(scope="session")
def default_strategy() -> tuple[Any, Any]:
    resolved = resolve("default", HostInfo())
    return build_strategy(tf, resolved), resolved


# -- numpy references ---------------------------------------------------------------------------


def softmax_ce(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    top = z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(z - top).sum(axis=1)) + top[:, 0]
    return log_norm - z[np.arange(len(y)), y]


def sigmoid_bce(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per example: binary cross-entropy from logits, averaged over the labels."""
    z = logits.astype(np.float64)
    return (np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))).mean(axis=1)


def huber(out: np.ndarray, y: np.ndarray, delta: float = 1.0) -> np.ndarray:
    d = np.abs(out.astype(np.float64) - y)
    return np.where(d <= delta, 0.5 * d**2, delta * d - 0.5 * delta**2).mean(axis=1)


# -- small workloads of each task kind ----------------------------------------------------------


class TaskWorkload(Workload):
    """Random features, labels from a fixed linear teacher; ``kind`` picks the task."""

    name = "tasks"
    models = ("mlp",)

    def __init__(self, kind: str = "binary", rows: int = 600, outputs: int = 3, **task: Any):
        super().__init__()
        self.kind, self.rows, self.outputs, self.task_options = kind, rows, outputs, task

    @property
    def task(self) -> Task:
        return Task.named(self.kind, **self.task_options)

    def load(self) -> Dataset:
        rng = np.random.default_rng(0)
        x = rng.normal(size=(self.rows, 6)).astype(np.float32)
        w = rng.normal(size=(6, self.outputs))
        score = x @ w
        outputs = self.outputs
        if self.kind == "multiclass":
            y = score.argmax(axis=1).astype(np.int32)
        elif self.kind == "binary":
            y, outputs = (score[:, 0] > 0).astype(np.int32), 1
        elif self.kind == "multilabel":
            y = (score > 0).astype(np.float32)
        else:
            y = score.astype(np.float32)
        split = self.rows * 2 // 3
        return Dataset(x[:split], y[:split], x[split:], y[split:], num_classes=outputs)

    def build_model(self, model: str, data: Dataset) -> Any:
        import keras

        return keras.Sequential(
            [
                keras.Input(data.input_shape),
                keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(data.num_classes),
            ]
        )


# -- streams over in-memory arrays --------------------------------------------------------------


def shuffled_streams(data: Dataset) -> Any:
    """`Streams` over ``data``: tf.data shuffles with the seed, a fresh order per epoch."""
    from study.workloads.base import Streams

    def train(seed: int, num_shards: int, shard_index: int) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        dataset = dataset.shard(num_shards, shard_index)
        return dataset.shuffle(len(data.y_train), seed=seed, reshuffle_each_iteration=True)

    return Streams(
        train=train,
        val=lambda: tf.data.Dataset.from_tensor_slices((data.x_val, data.y_val)),
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        train_examples=len(data.y_train),
        val_examples=len(data.y_val),
    )


def index_ordered_streams(data: Dataset, epochs: int = 20) -> Any:
    """`Streams` over ``data`` in exactly the in-memory path's order (`IndexStream`'s seeded
    permutations), so both paths must give the same curve; ``epochs`` permutations form the
    "epoch" the trainer repeats."""
    from study.trainer.inputs import IndexStream
    from study.workloads.base import Streams

    n = len(data.y_train)

    def train(seed: int, num_shards: int, shard_index: int) -> tf.data.Dataset:
        order = IndexStream(n, seed).take(epochs * n)
        indices = tf.data.Dataset.from_tensor_slices(order).shard(num_shards, shard_index)
        x, y = tf.constant(data.x_train), tf.constant(data.y_train)
        return indices.map(lambda i: (tf.gather(x, i), tf.gather(y, i)))

    return Streams(
        train=train,
        val=lambda: tf.data.Dataset.from_tensor_slices((data.x_val, data.y_val)),
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        train_examples=n,
        val_examples=len(data.y_val),
    )


def index_ordered_blocks(data: Dataset, epochs: int = 20, rows: int = 97) -> Any:
    """`index_ordered_streams` in row blocks (``Streams.blocks``): blocks of ``rows`` rows (the
    last one shorter) in exactly the in-memory path's order."""
    from study.trainer.inputs import IndexStream
    from study.workloads.base import Streams

    n = len(data.y_train)

    def train(seed: int, num_shards: int, shard_index: int) -> tf.data.Dataset:
        order = tf.constant(IndexStream(n, seed).take(epochs * n))
        x, y = tf.constant(data.x_train), tf.constant(data.y_train)
        starts = tf.data.Dataset.range(0, epochs * n, rows).shard(num_shards, shard_index)
        picked = starts.map(lambda s: order[s : s + rows])
        return picked.map(lambda i: (tf.gather(x, i), tf.gather(y, i)))

    return Streams(
        train=train,
        val=lambda: array_blocks(data.x_val, data.y_val, rows),
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        train_examples=n,
        val_examples=len(data.y_val),
        blocks=True,
    )


def shuffled_blocks(data: Dataset, rows: int = 97) -> Any:
    """`Streams` over ``data`` in row blocks, shuffled in one window of the whole epoch."""
    from study.workloads.base import Streams
    from study.workloads.blocks import shuffled_rows

    def train(seed: int, num_shards: int, shard_index: int) -> tf.data.Dataset:
        blocks = array_blocks(data.x_train, data.y_train, rows).shard(num_shards, shard_index)
        return shuffled_rows(blocks, seed, window=len(data.y_train))

    return Streams(
        train=train,
        val=lambda: array_blocks(data.x_val, data.y_val, rows),
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        train_examples=len(data.y_train),
        val_examples=len(data.y_val),
        blocks=True,
    )


def run_script(script: str, timeout: float = 300) -> Any:
    """Run a Python script in a process of its own (to give TensorFlow other devices, fixed
    when its runtime starts), forked from the tests' zygote, which imported TensorFlow without
    starting it, in the repository root; return the JSON its last output line prints."""
    import json
    import os
    import tempfile
    from pathlib import Path

    from tests.zygote import ROOT, zygote

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="study-script-") as folder:
        path, out, err = (Path(folder) / name for name in ("script.py", "out", "err"))
        path.write_text(script)
        process = zygote().spawn([], cwd=ROOT, env=env, stdout=out, stderr=err, module=str(path))
        try:
            status = process.wait(timeout)
        finally:
            if process.poll() is None:
                process.kill()
        assert status == 0, err.read_text()[-3000:]
        return json.loads(out.read_text().strip().splitlines()[-1])
