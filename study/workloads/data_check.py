"""What a workload's `load()` must return, checked: one line per way the data can be wrong.

NumPy only (no TensorFlow). For a `Dataset`: both splits non-empty, one label per example, the
same example shape in both splits, numeric finite features, labels that fit the task and
``num_classes``. For `Streams`: positive example counts and outputs. Example::

    check_data(Dataset(x, y, x_val, y_val, num_classes=3), TaskKind.MULTICLASS)
    # UsageError: y_train holds label 3, but num_classes is 3: class ids must be 0..2 (set
    # num_classes to the number of classes, or re-number the labels)
"""

from __future__ import annotations

import numpy as np

from study.errors import UsageError
from study.workloads.base import Dataset, Streams
from study.workloads.task import TaskKind

__all__ = ["check_data"]


def check_data(data: Dataset | Streams, kind: TaskKind) -> None:
    """Raise `UsageError` on the first problem of ``data`` for a ``kind`` task."""
    if data.num_classes < 1 or isinstance(data.num_classes, bool):
        raise UsageError(f"num_classes is {data.num_classes}; give the number of model outputs")
    if isinstance(data, Streams):
        for part, count in (("train", data.train_examples), ("val", data.val_examples)):
            if count < 1:
                raise UsageError(f"Streams.{part}_examples is {count}; the {part} split is empty")
        return
    for part in ("train", "val"):
        x, y = np.asarray(getattr(data, f"x_{part}")), np.asarray(getattr(data, f"y_{part}"))
        _check_split(part, x, y)
        _check_labels(f"y_{part}", y, kind, data.num_classes)
    if data.x_val.shape[1:] != data.x_train.shape[1:]:
        raise UsageError(
            f"x_val's examples have shape {tuple(data.x_val.shape[1:])} but x_train's have "
            f"{tuple(data.x_train.shape[1:])}; give both splits the same features"
        )


def _check_split(part: str, x: np.ndarray, y: np.ndarray) -> None:
    if x.ndim < 2 or x.shape[0] == 0:
        raise UsageError(
            f"x_{part} has shape {x.shape}: the {part} split is empty or has no feature axis; "
            "give an array [examples, features...] with at least one row"
        )
    if y.shape[:1] != x.shape[:1]:
        raise UsageError(
            f"x_{part} has {x.shape[0]} rows but y_{part} has {y.shape[0] if y.ndim else 0}; "
            "give one label per example"
        )
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise UsageError(
            f"x_{part} has dtype {x.dtype}; give float32 features (or int32 token ids)"
        )
    bad = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
    if bad:
        raise UsageError(
            f"x_{part} has {bad} non-finite value(s) (NaN or inf); clean or impute them"
        )


def _check_labels(name: str, y: np.ndarray, kind: TaskKind, outputs: int) -> None:
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise UsageError(f"{name} has dtype {y.dtype}; labels must be numbers")
    if not np.all(np.isfinite(y)):
        raise UsageError(f"{name} has NaN or inf labels; drop or fix those examples")
    per_example = int(np.prod(y.shape[1:], dtype=np.int64))
    if kind is TaskKind.MULTICLASS:
        if per_example != 1:
            raise UsageError(
                f"{name} has shape {y.shape}; a multiclass task takes one class id per example"
            )
        if outputs < 2:
            raise UsageError(f"num_classes is {outputs}; a multiclass task needs at least 2")
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise UsageError(f"{name} holds non-integer labels; give class ids 0..{outputs - 1}")
        low, high = int(np.min(y)), int(np.max(y))
        if low < 0 or high >= outputs:
            bad = high if high >= outputs else low
            raise UsageError(
                f"{name} holds label {bad}, but num_classes is {outputs}: class ids must be "
                f"0..{outputs - 1} (set num_classes to the number of classes, or re-number the "
                "labels)"
            )
        return
    width = 1 if kind is TaskKind.BINARY else outputs
    if per_example != width or (kind is TaskKind.BINARY and outputs != 1):
        raise UsageError(
            f"{name} has shape {y.shape} and num_classes is {outputs}; a {kind.value} task "
            f"needs {_needs(kind)}"
        )
    if kind in (TaskKind.BINARY, TaskKind.MULTILABEL) and not np.all(np.isin(y, (0, 1))):
        raise UsageError(f"{name} holds values other than 0 and 1; a {kind.value} task needs 0/1")


def _needs(kind: TaskKind) -> str:
    return {
        TaskKind.BINARY: "labels of shape [n] (0/1) and num_classes=1 (one logit)",
        TaskKind.MULTILABEL: "labels of shape [n, K] (0/1) and num_classes=K",
        TaskKind.REGRESSION: "targets of shape [n] (num_classes=1) or [n, K] (num_classes=K)",
    }[kind]
