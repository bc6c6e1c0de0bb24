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

Example (a study file)::

    workload: tfrecord
    workload_options:
      train: data/train-*.tfrecord
      val: data/val-*.tfrecord
      features: {pixels: "float32[64]", digit: "int64[]"}
      label: digit

On the command line: ``--workload-option features=pixels:float32[64],digit:int64[]``.
"""

from __future__ import annotations

import glob
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from study.errors import UsageError
from study.workloads import int_option
from study.workloads.base import Streams, Workload
from study.workloads.blocks import shuffled_rows
from study.workloads.files import RunningStats, cached_json, fingerprint, task_option
from study.workloads.task import Task, TaskKind

if TYPE_CHECKING:  # pragma: no cover
    import keras

__all__ = ["FeatureSpec", "TfrecordWorkload", "parse_features"]

_SPEC = re.compile(r"(float32|int64)\[\s*(\d+(?:\s*,\s*\d+)*)?\s*\]")
_ENTRY = re.compile(r"\s*([A-Za-z_][\w.\-/]*)\s*[:=]\s*([a-z0-9]+\[[^\]]*\])\s*(?:[,;]|$)")
_PASS_VERSION = 1  # bump when the counting pass changes, so cached counts are not reused
_BATCH = 512
_TARGETS = {
    TaskKind.MULTICLASS: "val_accuracy>=0.9",
    TaskKind.BINARY: "val_auc>=0.9",
    TaskKind.MULTILABEL: "val_accuracy>=0.9",
    TaskKind.REGRESSION: "val_mse<=0.5",
}


@dataclass(frozen=True)
class FeatureSpec:
    """One fixed-length feature: ``float32[40]`` is dtype float32, shape (40,)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


def parse_spec(name: str, text: Any) -> FeatureSpec:
    """``float32[40]`` -> FeatureSpec(name, "float32", (40,)).

    Raises:
        UsageError: "workload option 'features': feature 'x' must be float32[dims] or
            int64[dims], e.g. float32[40] or int64[] (got 'float[40]')".
    """
    match = _SPEC.fullmatch(text.strip()) if isinstance(text, str) else None
    shape = tuple(int(d) for d in match.group(2).split(",")) if match and match.group(2) else ()
    if match is None or any(d < 1 for d in shape):
        raise UsageError(
            f"workload option 'features': feature {name!r} must be float32[dims] or "
            f"int64[dims], e.g. float32[40] or int64[] (got {text!r})"
        )
    return FeatureSpec(name, match.group(1), shape)


def parse_features(value: Any) -> tuple[FeatureSpec, ...]:
    """A mapping ``{name: spec}``, or the text ``name:spec,name:spec`` (command line).

    Raises:
        UsageError: on option ``features``.
    """
    if isinstance(value, str):
        entries, end = [], 0
        for match in _ENTRY.finditer(value):
            if match.start() != end:
                break
            entries.append((match.group(1), match.group(2)))
            end = match.end()
        if end != len(value) or not entries:
            raise UsageError(
                "workload option 'features': expected name:dtype[dims] pairs separated by "
                f"commas, e.g. x:float32[40],y:int64[] (got {value!r})"
            )
        if len({n for n, _ in entries}) != len(entries):
            raise UsageError(f"workload option 'features': a feature is named twice in {value!r}")
        value = dict(entries)
    if not isinstance(value, Mapping) or not value:
        raise UsageError(
            "workload option 'features': give a mapping of feature name to dtype[dims], "
            f"e.g. {{x: float32[40], y: int64[]}} (got {value!r})"
        )
    return tuple(parse_spec(str(name), spec) for name, spec in value.items())


class TfrecordWorkload(Workload):
    """Train on TFRecord files: options ``train``, ``val`` (glob patterns), ``features``,
    ``label``, ``task``, ``num_classes``, ``shuffle_buffer``; model ``mlp``."""

    name: ClassVar[str] = "tfrecord"
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"

    def __init__(
        self,
        *,
        train: str | None = None,
        val: str | None = None,
        features: Mapping[str, str] | str | None = None,
        label: str | None = None,
        task: str = "multiclass",
        num_classes: int | None = None,
        shuffle_buffer: int = 10_000,
    ) -> None:
        super().__init__()
        kind = task_option(task, list(TaskKind), workload=self.name)
        specs = parse_features(features)
        self._options = {
            "train": _pattern_option("train", train),
            "val": _pattern_option("val", val),
            "features": {s.name: str(s) for s in specs},
            "label": label,
            "task": kind.value,
            "num_classes": None,
            "shuffle_buffer": int_option("shuffle_buffer", shuffle_buffer, minimum=1),
        }
        by_name = {s.name: s for s in specs}
        if not isinstance(label, str) or label not in by_name:
            raise UsageError(
                f"workload option 'label': give the feature that holds the label, one of "
                f"{', '.join(by_name)} (got {label!r})"
            )
        self.label = by_name[label]
        self.inputs = tuple(s for s in specs if s.name != label)
        if not self.inputs:
            raise UsageError(
                "workload option 'features': besides the label there is no input feature"
            )
        _check_label(self.label, kind)
        if num_classes is not None:
            if kind is not TaskKind.MULTICLASS:
                raise UsageError(
                    f"workload option 'num_classes' applies to task multiclass only "
                    f"(task is {kind.value})"
                )
            self._options["num_classes"] = int_option("num_classes", num_classes, minimum=2)
        self.counts: dict[str, Any] = {}

    @property
    def kind(self) -> TaskKind:
        return TaskKind(self._options["task"])

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
            _check_first_record(part, self._options[part], files[part], self._specs)
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
        pattern = self._options[part]
        if pattern is None:
            raise UsageError(
                f"workload option {part!r}: give a glob pattern of the {part} TFRecord files"
            )
        found = sorted(
            p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)
        )
        if not found:
            raise UsageError(f"workload option {part!r}: no file matches {pattern!r}")
        return found

    def _count(self, files: dict[str, list[str]]) -> dict[str, Any]:
        """Records per part, the class count (multiclass) and label statistics (regression)."""
        key = fingerprint(
            [*files["train"], *files["val"]],
            version=_PASS_VERSION,
            parts=[len(files["train"]), len(files["val"])],
            features=self._options["features"],
            label=self.label.name,
            task=self.kind.value,
        )
        counts = cached_json("tfrecord-count", key, lambda: _counting_pass(files, self))
        if self.kind is TaskKind.MULTICLASS:
            given, largest = self._options["num_classes"], counts["max_label"]
            if given is not None and largest >= given:
                raise UsageError(
                    f"workload option 'num_classes': label {self.label.name!r} reaches "
                    f"{largest}, so num_classes must be at least {largest + 1} (got {given})"
                )
            if given is None and largest < 1:
                raise UsageError(
                    f"workload option 'label': label {self.label.name!r} is always "
                    f"{largest}; a classifier needs at least 2 classes"
                )
            counts["outputs"] = given or largest + 1
        return counts

    def _streams(self, files: dict[str, list[str]], counts: dict[str, Any]) -> Streams:
        shuffle_buffer = self._options["shuffle_buffer"]
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
        raise UsageError(
            f"workload option {part!r}: expected a glob pattern like data/{part}-*.tfrecord "
            f"(got {value!r})"
        )
    return os.fspath(value)


def _check_label(label: FeatureSpec, kind: TaskKind) -> None:
    """The label's spec suits the task (a class id is an int64 scalar, ...)."""
    need = {
        TaskKind.MULTICLASS: ("an int64[] class id", label.dtype == "int64" and not label.shape),
        TaskKind.BINARY: ("a 0/1 scalar (int64[] or float32[])", not label.shape),
        TaskKind.MULTILABEL: ("a vector of 0/1 like int64[5]", len(label.shape) == 1),
        TaskKind.REGRESSION: (
            "a number or vector like float32[] or float32[3]",
            len(label.shape) <= 1,
        ),
    }
    what, ok = need[kind]
    if not ok:
        raise UsageError(
            f"workload option 'label': task {kind.value} needs {what}; feature {label.name!r} "
            f"is {label}"
        )


# -- TensorFlow-side checks --------------------------------------------------------------------


def _check_first_record(
    part: str, pattern: str, files: list[str], specs: tuple[FeatureSpec, ...]
) -> None:
    """Compare the first record of the first non-empty file with the spec.

    Raises:
        UsageError: "workload option 'features': data/train-0.tfrecord: feature 'x' has 39
            float values in its first record, but the spec float32[40] needs 40".
    """
    import tensorflow as tf

    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as exc:
            raise UsageError(
                f"workload option {part!r}: {path} is not a TFRecord file ({_first_line(exc)})"
            ) from None
        if first is None:
            continue
        try:
            example = tf.train.Example.FromString(first.numpy())
        except Exception as exc:  # protobuf's DecodeError: the record is not an Example
            raise UsageError(
                f"workload option {part!r}: the first record of {path} is not a "
                f"tf.train.Example ({type(exc).__name__})"
            ) from None
        found = example.features.feature
        for spec in specs:
            problem = _mismatch(spec, found)
            if problem:
                raise UsageError(f"workload option 'features': {path}: {problem}")
        return
    raise UsageError(f"workload option {part!r}: the files matching {pattern!r} hold no records")


def _mismatch(spec: FeatureSpec, found: Any, where: str = "its first record") -> str | None:
    """What is wrong with ``spec``'s feature in a parsed Example's feature map, if anything."""
    if spec.name not in found:
        names = ", ".join(sorted(found)) or "none"
        return f"feature {spec.name!r} is missing from {where} (found: {names})"
    kind = found[spec.name].WhichOneof("kind")
    stored = {"float_list": "float", "int64_list": "int64", "bytes_list": "bytes"}.get(kind, "no")
    wanted = "float" if spec.dtype == "float32" else "int64"
    values = len(getattr(found[spec.name], kind).value) if kind else 0
    if stored != wanted:
        return (
            f"feature {spec.name!r} holds {values} {stored} value(s) in {where}, but "
            f"the spec says {spec}"
        )
    if values != spec.size:
        return (
            f"feature {spec.name!r} has {values} {stored} value(s) in {where}, but "
            f"the spec {spec} needs {spec.size}"
        )
    return None


def _counting_pass(files: dict[str, list[str]], workload: TfrecordWorkload) -> dict[str, Any]:
    """Parse every record once: counts per part, largest class id, label checks and (regression)
    the training labels' mean and standard deviation."""
    import tensorflow as tf

    label, kind = workload.label, workload.kind
    spec = {s.name: tf.io.FixedLenFeature(s.shape, getattr(tf, s.dtype)) for s in workload._specs}
    result: dict[str, Any] = {"train": 0, "val": 0, "max_label": -1}
    stats = RunningStats()
    for part, paths in files.items():
        for path in paths:
            batches = tf.data.TFRecordDataset(path).batch(4096)
            batches = batches.map(lambda b: tf.io.parse_example(b, spec)[label.name])
            try:
                for y in batches.as_numpy_iterator():
                    _check_label_values(path, label, kind, y)
                    result[part] += len(y)
                    if kind is TaskKind.MULTICLASS:
                        result["max_label"] = max(result["max_label"], int(y.max()))
                    if kind is TaskKind.REGRESSION and part == "train":
                        stats.update(y.reshape(len(y), -1))
            except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as exc:
                raise UsageError(
                    f"workload option 'features': {path}: {_bad_record(tf, path, workload._specs, exc)}"
                ) from None
    if result["train"] == 0 or result["val"] == 0:
        empty = "train" if result["train"] == 0 else "val"
        raise UsageError(f"workload option {empty!r}: the files hold no records")
    outputs = {TaskKind.BINARY: 1}.get(kind, label.size)
    result["outputs"] = outputs
    if kind is TaskKind.REGRESSION:
        result["label_mean"] = [float(v) for v in stats.mean]
        result["label_std"] = [float(v) for v in stats.std]
    return result


def _check_label_values(path: str, label: FeatureSpec, kind: TaskKind, y: np.ndarray) -> None:
    bad: np.ndarray | None = None
    if kind is TaskKind.MULTICLASS:
        bad = y[y < 0]
        need = "class ids 0, 1, 2, ..."
    elif kind in (TaskKind.BINARY, TaskKind.MULTILABEL):
        bad = y[(y != 0) & (y != 1)]
        need = "0 or 1"
    elif not np.isfinite(y).all():
        bad = y[~np.isfinite(y)]
        need = "finite numbers"
    if bad is not None and bad.size:
        raise UsageError(
            f"workload option 'label': {path}: label {label.name!r} holds {bad.flat[0].item()!r}; "
            f"task {kind.value} needs {need}"
        )


def _bad_record(tf: Any, path: str, specs: tuple[FeatureSpec, ...], exc: Exception) -> str:
    """Which record of ``path`` breaks the spec, and how (TensorFlow's reason if none does)."""
    try:
        for number, raw in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator(), 1):
            found = tf.train.Example.FromString(raw).features.feature
            for spec in specs:
                problem = _mismatch(spec, found, f"record {number}")
                if problem:
                    return problem
    except Exception:  # a corrupt file: report TensorFlow's reason below
        pass
    return f"a record does not match the spec ({_first_line(exc)})"


_TF_NOISE = (
    re.compile(r"\{\{[^}]*\}\}\s*"),
    re.compile(r"Error in user-defined function passed to .*? iterator: \S+:\s*"),
    re.compile(r"\s*\[Op:.*$"),
)


def _first_line(exc: Exception) -> str:
    """The first line of a TensorFlow error without its graph-node decorations."""
    text = getattr(exc, "message", None) or str(exc)
    for noise in _TF_NOISE:
        text = noise.sub("", text)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
