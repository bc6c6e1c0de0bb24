"""What `load()` must return: one line for each way a dataset can be wrong (NumPy only)."""

from __future__ import annotations

import numpy as np
import pytest

from study.errors import UsageError
from study.workloads.base import Dataset, Streams
from study.workloads.data_check import check_data
from study.workloads.task import TaskKind

X = np.zeros((10, 3), np.float32)
Y = np.arange(10, dtype=np.int32) % 2


def data(**changes: object) -> Dataset:
    parts = {"x_train": X, "y_train": Y, "x_val": X[:4], "y_val": Y[:4], "num_classes": 2}
    return Dataset(**{**parts, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "dataset"),
    [
        (TaskKind.MULTICLASS, data()),
        (TaskKind.BINARY, data(num_classes=1, y_train=Y.astype(np.float32))),
        (TaskKind.MULTILABEL, data(y_train=np.ones((10, 2)), y_val=np.zeros((4, 2)))),
        (TaskKind.REGRESSION, data(num_classes=1, y_train=np.linspace(0, 1, 10), y_val=Y[:4])),
    ],
)
def test_good_data_pass(kind: TaskKind, dataset: Dataset) -> None:
    check_data(dataset, kind)


@pytest.mark.parametrize(
    ("kind", "dataset", "message"),
    [
        (TaskKind.MULTICLASS, data(x_train=X[:0], y_train=Y[:0]), "the train split is empty"),
        (TaskKind.MULTICLASS, data(y_train=Y[:9]), "x_train has 10 rows but y_train has 9"),
        (TaskKind.MULTICLASS, data(x_val=np.zeros((4, 2))), "x_val's examples have shape (2,)"),
        (TaskKind.MULTICLASS, data(x_train=X.astype(object)), "x_train has dtype object"),
        (TaskKind.MULTICLASS, data(x_train=X + np.nan), "30 non-finite value(s)"),
        (TaskKind.MULTICLASS, data(y_train=Y + 1), "y_train holds label 2, but num_classes is 2"),
        (TaskKind.MULTICLASS, data(y_val=Y[:4] - 1), "y_val holds label -1"),
        (TaskKind.MULTICLASS, data(y_train=Y + 0.5), "non-integer labels"),
        (TaskKind.MULTICLASS, data(num_classes=1), "a multiclass task needs at least 2"),
        (TaskKind.MULTICLASS, data(y_train=np.ones((10, 2))), "one class id per example"),
        (TaskKind.BINARY, data(), "num_classes=1 (one logit)"),
        (TaskKind.BINARY, data(num_classes=1, y_train=Y * 3), "values other than 0 and 1"),
        (TaskKind.MULTILABEL, data(num_classes=3, y_train=np.ones((10, 2))), "num_classes=K"),
        (TaskKind.REGRESSION, data(num_classes=1, y_val=np.full(4, np.inf)), "NaN or inf labels"),
    ],
)
def test_each_problem_is_one_line(kind: TaskKind, dataset: Dataset, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        check_data(dataset, kind)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_streams_need_examples_in_both_splits() -> None:
    def streams(val: int) -> Streams:
        return Streams(lambda *a: None, lambda: None, (3,), 2, train_examples=5, val_examples=val)

    check_data(streams(2), TaskKind.MULTICLASS)
    with pytest.raises(UsageError, match=r"Streams.val_examples is 0; the val split is empty"):
        check_data(streams(0), TaskKind.MULTICLASS)
