"""Reading the tfrecord workload's files against its spec (TensorFlow): the first record of each
file pattern, then one counting pass over every record.

`check_first_record` compares the first record of a pattern's files with the spec;
`counting_pass` parses every record once: the records per part, the largest class id, the label
values' checks and (regression) the training labels' mean and standard deviation. Every problem
is a one-line `FieldError` on the option it is about (``train`` / ``val`` for the files,
``features`` for a record that breaks the spec, ``label`` for a bad label value), naming the
file, the feature and what was found. Example::

    counting_pass({"train": [...], "val": [...]}, specs, label, TaskKind.MULTICLASS)
    # -> {"train": 75, "val": 15, "max_label": 2, "outputs": 1}
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from study.workloads.files import RunningStats
from study.workloads.options import option_error
from study.workloads.task import TaskKind
from study.workloads.tfrecord_spec import FeatureSpec

__all__ = ["check_first_record", "counting_pass"]

_TF_NOISE = (
    re.compile(r"\{\{[^}]*\}\}\s*"),
    re.compile(r"Error in user-defined function passed to .*? iterator: \S+:\s*"),
    re.compile(r"\s*\[Op:.*$"),
)


def check_first_record(
    part: str, pattern: str, files: list[str], specs: tuple[FeatureSpec, ...]
) -> None:
    """Compare the first record of the first non-empty file with the spec.

    Raises:
        FieldError: "workload option 'features': data/train-0.tfrecord: feature 'x' has 39
            float values in its first record, but the spec float32[40] needs 40".
    """
    import tensorflow as tf

    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except (tf.errors.OpError, UnicodeDecodeError) as exc:  # see `_first_line`
            raise option_error(
                part, "", detail=f"{path} is not a TFRecord file ({_first_line(exc)})"
            ) from None
        if first is None:
            continue
        try:
            example = tf.train.Example.FromString(first.numpy())
        except Exception as exc:  # protobuf's DecodeError: the record is not an Example
            raise option_error(
                part,
                "",
                detail=f"the first record of {path} is not a "
                f"tf.train.Example ({type(exc).__name__})",
            ) from None
        found = example.features.feature
        for spec in specs:
            problem = _mismatch(spec, found)
            if problem:
                raise option_error("features", "", detail=f"{path}: {problem}")
        return
    raise option_error(part, "", detail=f"the files matching {pattern!r} hold no records")


def counting_pass(
    files: dict[str, list[str]],
    specs: tuple[FeatureSpec, ...],
    label: FeatureSpec,
    kind: TaskKind,
) -> dict[str, Any]:
    """Parse every record once: counts per part, largest class id, label checks and (regression)
    the training labels' mean and standard deviation."""
    import tensorflow as tf

    spec = {s.name: tf.io.FixedLenFeature(s.shape, getattr(tf, s.dtype)) for s in specs}
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
            except (tf.errors.OpError, UnicodeDecodeError) as exc:  # see `_first_line`
                raise option_error(
                    "features", "", detail=f"{path}: {_bad_record(tf, path, specs, exc)}"
                ) from None
    if result["train"] == 0 or result["val"] == 0:
        empty = "train" if result["train"] == 0 else "val"
        raise option_error(empty, "", detail="the files hold no records")
    outputs = {TaskKind.BINARY: 1}.get(kind, label.size)
    result["outputs"] = outputs
    if kind is TaskKind.REGRESSION:
        result["label_mean"] = [float(v) for v in stats.mean]
        result["label_std"] = [float(v) for v in stats.std]
    return result


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
        raise option_error(
            "label",
            "",
            detail=f"{path}: label {label.name!r} holds {bad.flat[0].item()!r}; "
            f"task {kind.value} needs {need}",
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


def _first_line(exc: Exception) -> str:
    """The first line of a TensorFlow error without its graph-node decorations. (TensorFlow
    raises `UnicodeDecodeError` for an error whose message quotes a corrupt record's bytes.)"""
    if isinstance(exc, UnicodeDecodeError):
        return "a corrupt or truncated record"
    text = getattr(exc, "message", None) or str(exc)
    for noise in _TF_NOISE:
        text = noise.sub("", text)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
