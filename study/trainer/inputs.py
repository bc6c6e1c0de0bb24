"""Feeding examples to the compiled training and evaluation functions.

Two feeds with one interface. `ArrayFeed` (the in-memory fast path) keeps the arrays on the
device as constants and hands each compiled call an index array: the global batch is gathered
once and each replica takes its contiguous slice. `StreamFeed` (``Streams``, data larger than
memory) distributes the workload's `tf.data` pipeline with
``strategy.distribute_datasets_from_function``: one input pipeline per worker, sharded by
pipeline id, batched per replica (batches span epochs; a pipeline of row blocks is cut into
batches by slicing, `study.workloads.blocks`) and prefetched; one compiled call pulls
``steps`` batches from the distributed iterator. Either way the global batch of step ``t`` is
examples ``t*B .. (t+1)*B - 1`` of the epoch order (a fresh order every epoch), so ``default``
and ``mirrored:N`` do the same arithmetic.

One exception, for speed: replicas on logical CPU devices of one process (``mirrored:N`` on a
CPU host) share memory, and the per-device iterator `distribute_datasets_from_function` builds
costs ~0.3 ms a step there (5x the MNIST-1D MLP's step at batch 32). There the one pipeline is
batched globally and each replica slices its rows inside the step, as the in-memory path does:
replica ``r`` gets rows ``r*b .. (r+1)*b - 1`` of global batch ``t``, exactly the per-replica
batch ``t*R + r`` the distributed iterator would hand it (tested to agree).

Both fold the whole validation set inside one compiled evaluation call (chunks in a graph
loop, never a Python loop).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from study.trainer.graph_loops import for_each, for_range, while_true
from study.trainer.losses import Objective
from study.workloads.base import Dataset, Streams
from study.workloads.blocks import batches_of

#: One replica's training step on its slice of the global batch: (x, labels) -> its loss, or
#: (its loss, a vector of per-step statistics averaged over replicas, e.g. gradient norms).
ReplicaStep = Callable[[tf.Tensor, tf.Tensor], Any]
#: One evaluation chunk folded into the running state: (state, x, labels) -> state.
FoldBody = Callable[[Any, tf.Tensor, tf.Tensor], Any]

_MAX_INDICES_PER_CALL = 1 << 22  # bounds the index array handed to one compiled call
_EVAL_ELEMENTS = 1 << 24  # input values per evaluation chunk (8,192 rows of 2,048 values)
_MAX_EVAL_CHUNK = 8192


def eval_chunk(input_shape: tuple[int, ...]) -> int:
    """Validation examples per chunk: at most 8,192 and about 16M input values.

    Example: 8192 for MNIST-1D (40 values), 341 for 224x224x3 images.
    """
    per_example = max(1, int(np.prod(input_shape, dtype=np.int64)))
    return int(max(1, min(_MAX_EVAL_CHUNK, _EVAL_ELEMENTS // per_example)))


class IndexStream:
    """Example indices in epoch order: a fresh seeded permutation per epoch, batches may span
    epochs, so every example is seen once per epoch at any batch size.
    """

    def __init__(self, n: int, seed: int) -> None:
        self._n = n
        self._rng = np.random.default_rng(seed)
        self._buffer = np.empty(0, dtype=np.int32)

    def take(self, count: int) -> np.ndarray:
        while self._buffer.size < count:
            perm = self._rng.permutation(self._n).astype(np.int32)
            self._buffer = np.concatenate([self._buffer, perm])
        out, self._buffer = self._buffer[:count], self._buffer[count:]
        return out

    def position(self) -> tuple[dict, np.ndarray]:
        """Where the order stands (the generator's state and the indices drawn, not taken)."""
        return copy.deepcopy(self._rng.bit_generator.state), self._buffer.copy()

    def seek(self, position: tuple[dict, np.ndarray]) -> None:
        """Return to a `position`: the same indices follow."""
        state, buffer = position
        self._rng.bit_generator.state = copy.deepcopy(state)
        self._buffer = buffer.copy()


def sliced(replica_step: ReplicaStep, strategy: Any) -> ReplicaStep:
    """``replica_step`` on this replica's contiguous slice of a global batch (of any size: the
    slice is computed in the graph, so one trace serves every batch size)."""
    replicas = strategy.num_replicas_in_sync

    def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        if replicas > 1:
            per_replica = tf.shape(xb)[0] // replicas
            start = tf.distribute.get_replica_context().replica_id_in_sync_group * per_replica
            xb = xb[start : start + per_replica]
            yb = yb[start : start + per_replica]
        return replica_step(xb, yb)

    return step


@dataclass(frozen=True)
class MeasuredSteps:
    """A replica step that also measures ``extras`` statistics (averaged over replicas) on every
    ``every``-th global step: ``measured`` returns (loss, statistics) and runs on the steps whose
    number (``counter()``, read in cross-replica context at a chunk's start) is a multiple of
    ``every``; ``plain`` (the step without them) runs the others, whose statistics are NaN. The
    plain steps between two measured ones run in an inner loop of their own, so they cost what
    a plain step costs (no per-step branch), and a measured step may hold a synchronisation
    point (an all-reduce)."""

    plain: ReplicaStep
    measured: ReplicaStep
    counter: Callable[[], tf.Tensor]
    every: int
    extras: int

    def wrapped(self, wrap: Callable[[ReplicaStep], ReplicaStep]) -> MeasuredSteps:
        return MeasuredSteps(
            wrap(self.plain), wrap(self.measured), self.counter, self.every, self.extras
        )


def wrap_step(
    step: ReplicaStep | MeasuredSteps, wrap: Callable[[ReplicaStep], ReplicaStep]
) -> ReplicaStep | MeasuredSteps:
    return step.wrapped(wrap) if isinstance(step, MeasuredSteps) else wrap(step)


def chunk_loop(
    strategy: Any,
    step: ReplicaStep | MeasuredSteps,
    steps: tf.Tensor,
    batch: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]],
) -> Any:
    """Run ``steps`` global steps (call inside a `tf.function`); ``batch(i)`` gives step ``i``'s
    global (x, labels). Returns the losses summed over replicas, and for `MeasuredSteps` also
    the [steps, extras] statistics averaged over replicas (NaN rows on steps not measured).

    Each step sums its replicas' values on this host only; the sums over hosts (several
    workers) take one collective at the end of the chunk, not one per step.
    """
    losses = tf.TensorArray(tf.float32, size=steps)
    if not isinstance(step, MeasuredSteps):
        return _over_hosts(
            strategy,
            for_range(
                steps,
                lambda i, out: out.write(i, _host_sum(strategy, strategy.run(step, args=batch(i)))),
                losses,
            ).stack(),
        )
    # Only the measured rows are written (one in ``every``); the NaN rows are filled once at
    # the end, so a plain step writes nothing but its loss.
    rows = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[step.extras])
    where = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[])
    every = tf.constant(step.every, tf.int64)
    first = tf.cast(step.counter(), tf.int64)

    def plain(start: tf.Tensor) -> Callable[[tf.Tensor, Any], Any]:
        def write(j: tf.Tensor, out: Any) -> Any:
            loss = _host_sum(strategy, strategy.run(step.plain, args=batch(start + j)))
            return out.write(start + j, loss)

        return write

    def stretch(state: tuple[Any, ...]) -> tuple[Any, ...]:
        """The plain steps up to the next measured one, then that one (if any is left)."""
        i, k, losses, rows, where = state
        gap = tf.cast((every - (first + tf.cast(i, tf.int64)) % every) % every, tf.int32)
        count = tf.minimum(gap, steps - i)
        losses = for_range(count, plain(i), losses)
        i += count

        def measure() -> tuple[Any, ...]:
            loss, stat = strategy.run(step.measured, args=batch(i))
            written = losses.write(i, _host_sum(strategy, loss))
            return (
                i + 1,
                k + 1,
                written,
                rows.write(k, _host_sum(strategy, stat)),
                where.write(k, i),
            )

        return tf.cond(i < steps, measure, lambda: (i, k, losses, rows, where))

    start = (tf.constant(0), tf.constant(0), losses, rows, where)
    _, _, losses, rows, where = while_true(lambda state: state[0] < steps, stretch, start)
    unmeasured = tf.fill([steps, step.extras], float("nan"))
    stats = tf.tensor_scatter_nd_update(unmeasured, where.stack()[:, None], rows.stack())
    both = _over_hosts(strategy, tf.concat([losses.stack()[:, None], stats], axis=1))
    return both[:, 0], both[:, 1:] / float(strategy.num_replicas_in_sync)


def _host_sum(strategy: Any, value: Any) -> tf.Tensor:
    """The sum of this host's replicas' values of ``value`` (no communication between hosts)."""
    local = strategy.experimental_local_results(value)
    return local[0] if len(local) == 1 else tf.add_n(list(local))


def _over_hosts(strategy: Any, local: tf.Tensor) -> tf.Tensor:
    """The sum over hosts of each host's ``local`` sum: one all-reduce, none on one host."""
    replicas = strategy.num_replicas_in_sync
    here = 1 if replicas == 1 else len(strategy.extended.worker_devices)
    if here == replicas:
        return local
    shared = strategy.run(
        lambda v: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, v / float(here)
        ),
        args=(local,),
    )
    return strategy.experimental_local_results(shared)[0]


def shares_host_memory(strategy: Any) -> bool:
    """Whether the strategy's replicas are logical CPU devices of this one process."""
    if not isinstance(strategy, tf.distribute.MirroredStrategy):
        return False
    devices = strategy.extended.worker_devices
    return len(devices) > 1 and all("CPU" in d.upper() for d in devices)


class ArrayFeed:
    """In-memory arrays as device constants; each call takes a [steps, batch] index array.

    The batch size is not part of the trace (``[None, None]`` indices): one compiled function
    serves every batch size, and `start` sets the trial's.
    """

    kind = "memory"

    def __init__(self, data: Dataset, objective: Objective, strategy: Any, batch_size: int) -> None:
        self.batch_size = batch_size
        self.strategy = strategy
        self.train_examples = int(data.y_train.shape[0])
        self.input_shape = tuple(data.input_shape)
        self.x_train = tf.constant(data.x_train)
        self.y_train = tf.constant(objective.labels_array(data.y_train, where="training labels"))
        self.x_val = tf.constant(data.x_val)
        self.y_val = tf.constant(objective.labels_array(data.y_val, where="validation labels"))
        self._stream = IndexStream(self.train_examples, 0)

    @property
    def max_steps_per_call(self) -> int:
        """Steps per compiled call that keep its index array within bounds."""
        return max(1, _MAX_INDICES_PER_CALL // self.batch_size)

    def train_function(
        self, replica_step: ReplicaStep | MeasuredSteps
    ) -> tuple[Any, Callable[..., Any]]:
        """The compiled multi-step function and its one concrete function (called directly, it
        skips argument matching and can never retrace): [steps, batch] indices -> losses (and
        the statistics of `MeasuredSteps`, [steps, extras])."""
        strategy, x_train, y_train = self.strategy, self.x_train, self.y_train
        sliced_step = wrap_step(replica_step, lambda step: sliced(step, strategy))

        # One trace for every chunk length and batch size: [steps, batch], both unknown.
        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
        def train_chunk(indices: tf.Tensor) -> Any:
            def batch(i: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
                return tf.gather(x_train, indices[i]), tf.gather(y_train, indices[i])

            return chunk_loop(strategy, sliced_step, tf.shape(indices)[0], batch)

        return train_chunk, train_chunk.get_concrete_function()

    def start(self, seed: int, batch_size: int | None = None) -> None:
        """Begin a trial's example order (seeded), at its batch size if given."""
        if batch_size is not None:
            self.batch_size = batch_size
        self._stream = IndexStream(self.train_examples, seed)

    def position(self) -> tuple[dict, np.ndarray]:
        """Where the trial's example order stands (`seek` returns to it)."""
        return self._stream.position()

    def seek(self, position: tuple[dict, np.ndarray]) -> None:
        self._stream.seek(position)

    def args(self, count: int) -> tuple[tf.Tensor]:
        """The next ``count`` steps' indices (host work, untimed)."""
        indices = self._stream.take(count * self.batch_size)
        return (tf.constant(indices.reshape(count, self.batch_size)),)

    def warm_args(self, seed: int) -> tuple[tf.Tensor]:
        indices = np.arange(self.batch_size, dtype=np.int32) % self.train_examples
        return (tf.constant(indices[None, :]),)

    def fold(self, body: FoldBody, state: Any, labels: Callable[[tf.Tensor], tf.Tensor]) -> Any:
        """Fold ``body`` over the validation set in chunks (call inside a `tf.function`)."""
        del labels  # already prepared
        chunk = eval_chunk(self.input_shape)
        n = int(self.y_val.shape[0])
        x_val, y_val = self.x_val, self.y_val

        def fold_chunk(i: tf.Tensor, state: Any) -> Any:
            start = i * chunk
            return body(state, x_val[start : start + chunk], y_val[start : start + chunk])

        return for_range(tf.constant((n + chunk - 1) // chunk), fold_chunk, state)

    def sample(self, count: int = 2) -> tuple[tf.Tensor, tf.Tensor]:
        """A few validation examples (inputs, raw labels), eagerly."""
        return self.x_val[:count], self.y_val[:count]


class StreamFeed:
    """A `tf.data` pipeline distributed per replica; each call takes (iterator, steps).

    ``split_on_host``: batch the one pipeline globally and slice per replica in the step
    (replicas sharing this process's memory), instead of a distributed iterator.
    """

    kind = "streamed"

    def __init__(
        self,
        streams: Streams,
        objective: Objective,
        strategy: Any,
        batch_size: int,
        *,
        split_on_host: bool = False,
    ) -> None:
        self.split_on_host = split_on_host
        self.streams = streams
        self.objective = objective
        self.strategy = strategy
        self.batch_size = batch_size
        self.train_examples = int(streams.train_examples)
        self.input_shape = tuple(streams.input_shape)
        self.max_steps_per_call = 1 << 30
        chunk = eval_chunk(self.input_shape)
        val = streams.val()  # row blocks are evaluated as they come
        self.val = (val if streams.blocks else val.batch(chunk)).prefetch(tf.data.AUTOTUNE)
        self._iterator: Any = None
        self._seed = 0
        self._taken = 0
        self._sample: tuple[tf.Tensor, tf.Tensor] | None = None

    def dataset_fn(self, seed: int) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
        """The per-pipeline dataset: this pipeline's shard of the epoch order, repeated (one
        fresh order per epoch), batched per replica (batches span epochs), prefetched."""
        batch_size, streams = self.batch_size, self.streams

        def make(context: tf.distribute.InputContext) -> tf.data.Dataset:
            per_replica = context.get_per_replica_batch_size(batch_size)
            dataset = streams.train(seed, context.num_input_pipelines, context.input_pipeline_id)
            if streams.blocks:
                batches = batches_of(dataset.repeat(), per_replica)
            else:
                batches = dataset.repeat().batch(per_replica, drop_remainder=True)
            return batches.prefetch(tf.data.AUTOTUNE)

        return make

    def iterator(self, seed: int) -> Any:
        """A fresh iterator over the seeded pipeline: distributed, or of global batches."""
        if self.split_on_host:
            return iter(self.dataset_fn(seed)(tf.distribute.InputContext()))
        return iter(self.strategy.distribute_datasets_from_function(self.dataset_fn(seed)))

    def train_function(
        self, replica_step: ReplicaStep | MeasuredSteps
    ) -> tuple[Any, Callable[..., Any]]:
        """The compiled multi-step function: (distributed iterator, steps) -> losses (and the
        statistics of `MeasuredSteps`). ``steps`` is a tensor and every iterator of this
        pipeline has one type, so one trace serves every trial and chunk length."""
        strategy, labels = self.strategy, self.objective.labels
        if self.split_on_host:
            replica_step = wrap_step(replica_step, lambda step: sliced(step, strategy))

        def labelled(step: ReplicaStep) -> ReplicaStep:
            return lambda xb, yb: step(xb, labels(yb))

        labelled_step = wrap_step(replica_step, labelled)

        @tf.function(autograph=False)
        def train_chunk(iterator: Any, steps: tf.Tensor) -> Any:
            return chunk_loop(strategy, labelled_step, steps, lambda i: next(iterator))

        return train_chunk, train_chunk

    def start(self, seed: int, batch_size: int | None = None) -> None:
        """Begin a trial's example order: a fresh distributed iterator over the seeded pipeline.

        The batch size is baked into the pipeline: a session of another one is never reused.
        """
        if batch_size is not None and batch_size != self.batch_size:
            raise ValueError(f"a streamed feed of batch {self.batch_size} cannot run {batch_size}")
        self._iterator = self.iterator(seed)
        self._seed, self._taken = seed, 0

    def args(self, count: int) -> tuple[Any, tf.Tensor]:
        self._taken += count
        return (self._iterator, tf.constant(count, tf.int32))

    def position(self) -> int:
        """Where the trial's example order stands: the batches taken since `start`."""
        return self._taken

    def seek(self, taken: int) -> None:
        """Return to a `position`: start the seeded order afresh and skip the batches taken
        (pipeline work, no training; cheaper than checkpointing shuffle buffers at every
        evaluation, and it works for distributed iterators too)."""
        self._iterator = self.iterator(self._seed)
        if taken:
            _skip(self._iterator, tf.constant(taken, tf.int64))
        self._taken = taken

    def warm_args(self, seed: int) -> tuple[Any, tf.Tensor]:
        """A separate iterator for the untimed warm-up step (the trial's own starts afresh)."""
        return (self.iterator(seed), tf.constant(1, tf.int32))

    def fold(self, body: FoldBody, state: Any, labels: Callable[[tf.Tensor], tf.Tensor]) -> Any:
        """Fold ``body`` over every validation example once (call inside a `tf.function`)."""
        return for_each(iter(self.val), lambda xy, s: body(s, xy[0], labels(xy[1])), state)

    def sample(self, count: int = 2) -> tuple[tf.Tensor, tf.Tensor]:
        """A few validation examples (inputs, raw labels), read once and kept."""
        if self._sample is None or int(self._sample[0].shape[0]) != count:
            val = self.streams.val()
            val = (val.unbatch() if self.streams.blocks else val).batch(count)
            self._sample = tuple(t[:count] for t in next(iter(val)))
        return self._sample


@tf.function(autograph=False)
def _skip(iterator: Any, count: tf.Tensor) -> None:
    def take(i: tf.Tensor, taken: tf.Tensor) -> tf.Tensor:
        next(iterator)
        return taken + 1

    for_range(count, take, tf.zeros([], tf.int64))


def make_feed(
    data: Dataset | Streams, objective: Objective, strategy: Any, batch_size: int
) -> ArrayFeed | StreamFeed:
    """The feed for a workload's data: arrays in memory, or streamed `tf.data` pipelines."""
    if isinstance(data, Streams):
        split = shares_host_memory(strategy)
        return StreamFeed(data, objective, strategy, batch_size, split_on_host=split)
    return ArrayFeed(data, objective, strategy, batch_size)
