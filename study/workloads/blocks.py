"""Row blocks: `tf.data` pipelines whose elements are blocks of rows, not single examples.

`tf.data` pays about a microsecond per element for every per-example stage (shuffle, batch,
unbatch), more than an MLP's training step per example at a large batch. A workload that reads
rows in blocks (a chunk of CSV lines decoded at once, a batch of TFRecords parsed at once,
arrays sliced) keeps them in blocks: `shuffled_rows` shuffles them in windows with one gather
per window, and the trainer cuts exact batches with `batches_of`: one slice per batch. A
`Streams` with ``blocks=True`` promises this form (see `study.workloads.base.Streams`).

Semantics match the per-example pipeline: every row of an epoch once, a fresh order per epoch
drawn from the seed (windows of ``window`` rows are permuted, as a shuffle buffer of that size
mixes), batches of exactly ``batch`` rows spanning windows and epochs.

Example::

    blocks = tf.data.Dataset.range(4).map(lambda i: (x[i * 1000 : (i + 1) * 1000], y[...]))
    epoch = shuffled_rows(blocks, seed=3, window=4000)
    train = batches_of(epoch.repeat(), 512)  # [512, ...] batches, one slice each
"""

from __future__ import annotations

from typing import Any


def _rows(tf: Any, structure: Any) -> Any:
    return tf.shape(tf.nest.flatten(structure)[0])[0]


def _empty(tf: Any, spec: Any) -> Any:
    return tf.nest.map_structure(lambda s: tf.zeros([0, *s.shape[1:]], s.dtype), spec)


def _joined(tf: Any, carry: Any, block: Any) -> Any:
    return tf.nest.map_structure(lambda c, b: tf.concat([c, b], 0), carry, block)


def windows_of(blocks: Any, rows: int) -> Any:
    """Blocks of any sizes -> windows of at least ``rows`` rows, in order; the epoch's last
    window holds what is left (no row is dropped, no empty window is emitted)."""
    import tensorflow as tf

    spec = blocks.element_spec
    marked = blocks.map(lambda *b: (b if len(b) > 1 else b[0], False)).concatenate(
        tf.data.Dataset.from_tensors((_empty(tf, spec), True))
    )

    def step(carry: Any, item: Any) -> tuple[Any, Any]:
        block, last = item
        carry = _joined(tf, carry, block)
        done = tf.logical_or(last, _rows(tf, carry) >= rows)
        emit = tf.nest.map_structure(lambda c: tf.cond(done, lambda: c, lambda: c[:0]), carry)
        keep = tf.nest.map_structure(lambda c: tf.cond(done, lambda: c[:0], lambda: c), carry)
        return keep, emit

    return marked.scan(_empty(tf, spec), step).filter(lambda *w: _rows(tf, w) > 0)


def shuffled_rows(blocks: Any, seed: int, window: int) -> Any:
    """One epoch of row blocks -> windows of ``window`` rows, each in a random order drawn from
    ``seed`` and fresh every time the dataset is iterated again (``repeat`` gives new epochs)."""
    import tensorflow as tf

    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)

    def permute(pair: Any, rows: Any) -> Any:
        order = tf.random.experimental.stateless_shuffle(tf.range(_rows(tf, rows)), seed=pair)
        return tf.nest.map_structure(lambda t: tf.gather(t, order), rows)

    windows = windows_of(blocks, window)
    return tf.data.Dataset.zip((seeds, windows)).map(
        lambda pair, rows: permute(pair, rows), num_parallel_calls=tf.data.AUTOTUNE
    )


def batches_of(blocks: Any, batch: int) -> Any:
    """Row blocks -> batches of exactly ``batch`` rows, in order, spanning blocks (rows left
    at the end of a finite dataset are dropped, as ``drop_remainder=True`` does)."""
    import tensorflow as tf

    spec = blocks.element_spec

    def step(carry: Any, block: Any) -> tuple[Any, Any]:
        rows = _joined(tf, carry, block)
        k = _rows(tf, rows) // batch
        full = tf.nest.map_structure(
            lambda r: tf.reshape(r[: k * batch], tf.concat([[k, batch], tf.shape(r)[1:]], 0)),
            rows,
        )
        return tf.nest.map_structure(lambda r: r[k * batch :], rows), full

    flat = blocks.map(lambda *b: b if len(b) > 1 else b[0])
    return flat.scan(_empty(tf, spec), step).unbatch()


def array_blocks(x: Any, y: Any, rows: int = 1024) -> Any:
    """In-memory arrays as a dataset of blocks of ``rows`` rows, the last one shorter (views
    reshaped into blocks: no per-row work, and no map function, whose instantiation would cost
    ~10 ms every time the dataset is iterated, e.g. at every evaluation)."""
    import numpy as np
    import tensorflow as tf

    x, y = np.asarray(x), np.asarray(y)
    n = len(y)
    k = n // rows
    full = (
        x[: k * rows].reshape(k, rows, *x.shape[1:]),
        y[: k * rows].reshape(k, rows, *y.shape[1:]),
    )
    blocks = tf.data.Dataset.from_tensor_slices(full)
    if n > k * rows:
        blocks = blocks.concatenate(tf.data.Dataset.from_tensors((x[k * rows :], y[k * rows :])))
    return blocks
