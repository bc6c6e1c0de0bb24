"""The streamed csv workload's ``tf.data`` pipelines: a file read line by line, never whole.

Rows are the file's non-empty lines after the header (one row per line: no line breaks inside
quoted cells), numbered from 0 as pandas numbers them. A row is validation when the seeded
row hash says so (`study.workloads.files.val_rows`), the same rule the pandas pass used for
the statistics. Lines are numbered, selected (split, then shard by row number), decoded and
standardised a block of 4,096 lines at a time, and stay in blocks (``Streams.blocks``):
training rows are shuffled in windows of ``shuffle_buffer`` rows, reshuffled every epoch from
the seed, with one gather per window (`study.workloads.blocks`), and the trainer slices batches.

Example::

    streams = csv_streams(path, header, columns, scan, seed=0, val_fraction=0.2)
    next(iter(streams.train(7, 1, 0)))        # (x float32 [n, features], y [n]): a block of rows
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from study.workloads.base import Streams
from study.workloads.blocks import shuffled_rows
from study.workloads.csv_scan import Columns, Labels, Scan
from study.workloads.files import tf_val_rows
from study.workloads.task import TaskKind

_LINE_BLOCK = 4096


def csv_streams(
    path: str | os.PathLike[str],
    header: Sequence[str],
    columns: Columns,
    found: Scan,
    *,
    seed: int,
    val_fraction: float,
    shuffle_buffer: int = 10_000,
) -> Streams:
    """`Streams` over a csv file, from the facts of one pandas pass (``found``)."""
    path = os.fspath(os.path.expanduser(path))
    split_seed = seed

    def examples(keep: Any) -> Any:
        """The decoded data rows for which ``keep(rows)`` (int64 row numbers) holds, in file
        order; split, selected and decoded a block of lines at a time."""
        import tensorflow as tf

        decode = _decoder(tf, header, columns, found)

        def number(first: Any, block: Any) -> Any:
            block = tf.boolean_mask(block, tf.strings.length(block) > 0)
            rows = first + tf.range(tf.size(block, out_type=tf.int64))
            return first + tf.size(block, out_type=tf.int64), (rows, block)

        def select(rows: Any, block: Any) -> Any:
            return decode(tf.boolean_mask(block, tf.logical_and(rows >= 0, keep(rows))))

        blocks = tf.data.TextLineDataset(path).batch(_LINE_BLOCK)
        numbered = blocks.scan(tf.constant(-1, tf.int64), number)  # the header is row -1
        decoded = numbered.map(select, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return decoded.filter(lambda x, y: tf.shape(x)[0] > 0)

    def train(seed: int, num_shards: int = 1, shard_index: int = 0) -> Any:
        import tensorflow as tf

        def keep(rows: Any) -> Any:
            mine = tf.equal(rows % num_shards, shard_index)
            return tf.logical_and(mine, ~tf_val_rows(tf, rows, split_seed, val_fraction))

        return shuffled_rows(examples(keep), seed, shuffle_buffer)

    def val() -> Any:
        import tensorflow as tf

        return examples(lambda rows: tf_val_rows(tf, rows, split_seed, val_fraction))

    return Streams(
        train=train,
        val=val,
        input_shape=(len(columns.features),),
        num_classes=found.labels.outputs,
        train_examples=found.train_rows,
        val_examples=found.val_rows,
        blocks=True,
    )


def _decoder(tf: Any, header: Sequence[str], columns: Columns, found: Scan) -> Any:
    """A function from a vector of text lines to standardised (x, y) batches."""
    wanted = set(columns.labels) | set(columns.features)
    selected = [i for i, name in enumerate(header) if name in wanted]
    names = [header[i] for i in selected]
    labels = found.labels
    text_labels = labels.kind in (TaskKind.MULTICLASS, TaskKind.BINARY)
    defaults = [
        tf.constant([], tf.string if (name in columns.labels and text_labels) else tf.float64)
        for name in names
    ]
    feature_at = [names.index(c) for c in columns.features]
    label_at = [names.index(c) for c in columns.labels]
    mean = tf.constant(np.asarray(found.feature_mean), tf.float64)
    std = tf.constant(np.asarray(found.feature_std), tf.float64)
    to_target = _label_encoder(tf, labels)

    def decode(lines: Any) -> Any:
        fields = tf.io.decode_csv(lines, record_defaults=defaults, select_cols=selected)
        x = tf.stack([fields[i] for i in feature_at], axis=1)
        x = tf.cast((x - mean) / std, tf.float32)
        return x, to_target([fields[i] for i in label_at])

    return decode


def _label_encoder(tf: Any, labels: Labels) -> Any:
    """A function from the decoded label fields (batched) to the task's targets."""
    if labels.kind in (TaskKind.MULTICLASS, TaskKind.BINARY):
        out = tf.int32 if labels.kind is TaskKind.MULTICLASS else tf.float32
        if labels.numeric:
            values = tf.constant([float(v) for v in labels.class_values], tf.float64)

            def ids(fields: list[Any]) -> Any:
                y = tf.strings.to_number(fields[0], tf.float64)
                hit = tf.equal(y[:, None], values[None, :])
                return tf.cast(tf.argmax(tf.cast(hit, tf.int32), axis=1), out)

            return ids
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant([str(v) for v in labels.class_values]),
                tf.range(len(labels.class_values), dtype=tf.int64),
            ),
            default_value=-1,
        )
        return lambda fields: tf.cast(table.lookup(fields[0]), out)

    mean = tf.constant(np.asarray(labels.mean or [0.0] * len(labels.columns)), tf.float64)
    std = tf.constant(np.asarray(labels.std or [1.0] * len(labels.columns)), tf.float64)
    squeeze = labels.kind is TaskKind.REGRESSION and len(labels.columns) == 1

    def targets(fields: list[Any]) -> Any:
        y = tf.cast((tf.stack(fields, axis=1) - mean) / std, tf.float32)
        return y[:, 0] if squeeze else y

    return targets
