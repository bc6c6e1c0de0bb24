"""TFRecord files of ``tf.train.Example`` records, read with a feature spec.

``features`` maps each feature's name to ``dtype[dims]``: ``float32[40]``, ``int64[]`` (a
scalar), ``float32[28,28,1]``. One of them is the ``label``; the others are the model input: a
single input feature keeps its shape (a scalar becomes ``[1]``), several are flattened and
concatenated in the order given; all are cast to float32 and used as stored (write them
scaled). Labels follow ``task``: ``multiclass`` an ``int64[]`` class id (classes =
``num_classes``, or the largest id found + 1), ``binary`` a 0/1 scalar, ``multilabel`` a
``[K]`` vector of 0/1, ``regression`` a ``[]`` or ``[K]`` number, standardised with the
training records' mean and standard deviation (so the default target ``val_mse<=0.5`` means
"explains half the variance").

``load()`` checks the first record of each file pattern against the spec (a mismatch names the
file, the feature and what was found), then counts the records in one pass (which also parses
every record and checks the labels), cached by the files' sizes and modification times.
Training interleaves the files in a seeded order that changes every epoch, parses in batches
and keeps the rows in blocks (``Streams.blocks``), shuffled in windows of ``shuffle_buffer``
rows (`study.workloads.blocks`); validation reads its files in sorted order.

The spec is read in `study.workloads.tfrecord_spec`, the files checked and counted in
`study.workloads.tfrecord_scan`; every error is a `FieldError` on the option it is about.

Example (a study file)::

    workload: tfrecord
    workload_options:
      train: data/train-*.tfrecord
      val: data/val-*.tfrecord
      features: {pixels: "float32[64]", digit: "int64[]"}
      label: digit

As text (one command-line option): ``features=pixels:float32[64],digit:int64[]``.
"""

from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from study.workloads.base import Streams, Workload
from study.workloads.blocks import shuffled_rows
from study.workloads.files import cached_json, fingerprint
from study.workloads.options import Option, int_option, integer, option_error, tasks
from study.workloads.task import Task, TaskKind
from study.workloads.tfrecord_scan import check_first_record, counting_pass
from study.workloads.tfrecord_spec import FeatureSpec, check_label, parse_features

if TYPE_CHECKING:  # pragma: no cover
    import keras

__all__ = ["FeatureSpec", "TfrecordWorkload", "parse_features"]

_PASS_VERSION = 1  # bump when `counting_pass` changes, so cached counts are not reused
_BATCH = 512
_TARGETS = {
    TaskKind.MULTICLASS: "val_accuracy>=0.9",
    TaskKind.BINARY: "val_auc>=0.9",
    TaskKind.MULTILABEL: "val_accuracy>=0.9",
    TaskKind.REGRESSION: "val_mse<=0.5",
}


class TfrecordWorkload(Workload):
    """Train on TFRecord files: options ``train``, ``val`` (glob patterns), ``features``,
    ``label``, ``task``, ``num_classes``, ``shuffle_buffer``; model ``mlp``."""

    name: ClassVar[str] = "tfrecord"
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"

    option_specs: ClassVar[dict[str, Option]] = {
        "train": Option(None, lambda name, value: _pattern_option(name, value)),
        "val": Option(None, lambda name, value: _pattern_option(name, value)),
        "features": Option(None, lambda _, value: {s.name: str(s) for s in parse_features(value)}),
        "label": Option(None),
        "task": Option("multiclass", tasks()),
        "num_classes": Option(None, lambda name, value: _num_classes_option(name, value)),
        "shuffle_buffer": Option(10_000, integer(minimum=1)),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        label, kind = self.options["label"], self.kind
        specs = parse_features(self.options["features"])
        by_name = {s.name: s for s in specs}
        if not isinstance(label, str) or label not in by_name:
            raise option_error(
                "label",
                "must name a feature",
                label,
                detail=f"give the feature that holds the label, one of {', '.join(by_name)} "
                f"(got {label!r})",
            )
        self.label = by_name[label]
        self.inputs = tuple(s for s in specs if s.name != label)
        if not self.inputs:
            raise option_error(
                "features",
                "needs an input feature",
                detail="besides the label there is no input feature",
            )
        check_label(self.label, kind)
        if self.options["num_classes"] is not None and kind is not TaskKind.MULTICLASS:
            rule = f"applies to task multiclass only (task is {kind.value})"
            raise option_error("num_classes", rule)
        self.counts: dict[str, Any] = {}

    @property
    def kind(self) -> TaskKind:
        return TaskKind(self.options["task"])

    @property
    def task(self) -> Task:
        """The option's task; default targets: accuracy 0.9, AUC 0.9, MSE 0.5 (standardised)."""
        if self.kind is TaskKind.MULTICLASS:
            return Task.multiclass(_TARGETS[self.kind])
        return Task.named(self.kind.value, target=_TARGETS[self.kind])

    @property
    def input_shape(self) -> tuple[int, ...]:
        if len(self.inputs) == 1:
            return self.inputs[0].shape or (1,)
        return (sum(s.size for s in self.inputs),)

    def validate(self) -> None:
        """Both patterns match files (no TensorFlow)."""
        self._files("train")
        self._files("val")

    def load(self) -> Streams:
        """Check each pattern's first record, count (cached), and return `Streams`."""
        files = {part: self._files(part) for part in ("train", "val")}
        for part in files:
            check_first_record(part, self.options[part], files[part], self._specs)
        self.counts = self._count(files)
        return self._streams(files, self.counts)

    def build_model(self, model: str, data: Any) -> keras.Model:
        """``mlp``: Flatten -> Dense(64, relu) x 2 -> Dense(outputs)."""
        import keras

        self.check_model(model)
        return keras.Sequential(
            [
                keras.Input(shape=data.input_shape),
                keras.layers.Flatten(),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(data.outputs),
            ],
            name="tfrecord_mlp",
        )

    # -- files -----------------------------------------------------------------------------
    @property
    def _specs(self) -> tuple[FeatureSpec, ...]:
        return (*self.inputs, self.label)

    def _files(self, part: str) -> list[str]:
        pattern = self.options[part]
        if pattern is None:
            raise option_error(part, "", detail=f"give a glob pattern of the {part} TFRecord files")
        found = sorted(
            p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)
        )
        if not found:
            raise option_error(part, "", detail=f"no file matches {pattern!r}")
        return found

    def _count(self, files: dict[str, list[str]]) -> dict[str, Any]:
        """Records per part, the class count (multiclass) and label statistics (regression)."""
        key = fingerprint(
            [*files["train"], *files["val"]],
            version=_PASS_VERSION,
            parts=[len(files["train"]), len(files["val"])],
            features=self.options["features"],
            label=self.label.name,
            task=self.kind.value,
        )
        counts = cached_json(
            "tfrecord-count", key, lambda: counting_pass(files, self._specs, self.label, self.kind)
        )
        if self.kind is TaskKind.MULTICLASS:
            given, largest = self.options["num_classes"], counts["max_label"]
            if given is not None and largest >= given:
                raise option_error(
                    "num_classes",
                    "",
                    detail=f"label {self.label.name!r} reaches "
                    f"{largest}, so num_classes must be at least {largest + 1} (got {given})",
                )
            if given is None and largest < 1:
                raise option_error(
                    "label",
                    "",
                    detail=f"label {self.label.name!r} is always "
                    f"{largest}; a classifier needs at least 2 classes",
                )
            counts["outputs"] = given or largest + 1
        return counts

    def _streams(self, files: dict[str, list[str]], counts: dict[str, Any]) -> Streams:
        shuffle_buffer = self.options["shuffle_buffer"]
        train_files, val_files = files["train"], files["val"]

        def train(seed: int, num_shards: int = 1, shard_index: int = 0) -> Any:
            import tensorflow as tf

            names = tf.data.Dataset.from_tensor_slices(train_files)
            by_file = num_shards > 1 and len(train_files) >= num_shards
            if by_file:  # each shard reads its own files
                names = names.shard(num_shards, shard_index)
            count = -(-len(train_files) // num_shards) if by_file else len(train_files)
            names = names.shuffle(count, seed=seed, reshuffle_each_iteration=True)
            records = names.interleave(
                tf.data.TFRecordDataset,
                cycle_length=min(4, count),
                num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True,
            )
            if num_shards > 1 and not by_file:  # every shard sees the same seeded order
                records = records.shard(num_shards, shard_index)
            return shuffled_rows(self._parsed(tf, records, counts), seed, shuffle_buffer)

        def val() -> Any:
            import tensorflow as tf

            return self._parsed(tf, tf.data.TFRecordDataset(val_files), counts)

        return Streams(
            train=train,
            val=val,
            input_shape=self.input_shape,
            num_classes=counts["outputs"],
            train_examples=counts["train"],
            val_examples=counts["val"],
            blocks=True,
        )

    def _parsed(self, tf: Any, records: Any, counts: dict[str, Any]) -> Any:
        """Serialised records -> (x, y) row blocks, parsed a batch at a time, order kept."""
        spec = {s.name: tf.io.FixedLenFeature(s.shape, getattr(tf, s.dtype)) for s in self._specs}
        mean = np.asarray(counts.get("label_mean") or [0.0], np.float32)
        std = np.asarray(counts.get("label_std") or [1.0], np.float32)
        single = len(self.inputs) == 1
        kind, label = self.kind, self.label

        def parse(batch: Any) -> Any:
            parsed = tf.io.parse_example(batch, spec)
            if single:
                x = tf.cast(parsed[self.inputs[0].name], tf.float32)
                x = tf.reshape(x, [-1, *self.input_shape])
            else:
                flat = [
                    tf.reshape(tf.cast(parsed[s.name], tf.float32), [-1, s.size])
                    for s in self.inputs
                ]
                x = tf.concat(flat, axis=1)
            y = parsed[label.name]
            if kind is TaskKind.MULTICLASS:
                y = tf.cast(y, tf.int32)
            elif kind is TaskKind.REGRESSION:
                y = (tf.cast(y, tf.float32) - mean.reshape(label.shape)) / std.reshape(label.shape)
            else:
                y = tf.cast(y, tf.float32)
            return x, y

        return records.batch(_BATCH).map(
            parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )


def _pattern_option(part: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value).strip():
        raise option_error(
            part,
            "must be a glob pattern",
            value,
            detail=f"expected a glob pattern like data/{part}-*.tfrecord (got {value!r})",
        )
    return os.fspath(value)


def _num_classes_option(name: str, value: Any) -> int | None:
    return None if value is None else int_option(name, value, minimum=2)
