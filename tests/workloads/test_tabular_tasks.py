"""The tabular workload's tasks: the same table as binary, multi-label and regression."""

from __future__ import annotations

import numpy as np
import pytest

from study.config.target import Target
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.base import Dataset
from study.workloads.task import TaskKind

ROWS = 1000


def load(task: str) -> Dataset:
    data = get_workload("tabular", {"rows": ROWS, "task": task}).load()
    assert isinstance(data, Dataset)
    return data


@pytest.fixture(scope="module")
def tables() -> dict[str, Dataset]:
    return {task.value: load(task.value) for task in TaskKind}


def test_every_task_has_the_same_features(tables: dict[str, Dataset]) -> None:
    base = tables["multiclass"]
    for data in tables.values():
        np.testing.assert_array_equal(data.x_train, base.x_train)
        np.testing.assert_array_equal(data.x_val, base.x_val)


@pytest.mark.parametrize(
    ("task", "train_shape", "outputs"),
    [
        ("multiclass", (800,), 2),
        ("binary", (800,), 1),
        ("multilabel", (800, 3), 3),
        ("regression", (800,), 1),
    ],
)
def test_labels_follow_the_task(
    tables: dict[str, Dataset], task: str, train_shape: tuple[int, ...], outputs: int
) -> None:
    data = tables[task]
    assert data.y_train.shape == train_shape
    assert data.y_val.shape == (200, *train_shape[1:])
    assert data.num_classes == data.outputs == outputs
    expected = np.int32 if task == "multiclass" else np.float32
    assert data.y_train.dtype == data.y_val.dtype == expected


def test_binary_and_multilabel_keep_the_teacher_label(tables: dict[str, Dataset]) -> None:
    labels = tables["multiclass"].y_train
    np.testing.assert_array_equal(tables["binary"].y_train, labels.astype(np.float32))
    multilabel = tables["multilabel"].y_train
    np.testing.assert_array_equal(multilabel[:, 0], labels)
    assert set(np.unique(multilabel).tolist()) == {0.0, 1.0}
    # the projection signs are balanced and not copies of the teacher label
    assert all(0.4 < multilabel[:, k].mean() < 0.6 for k in (1, 2))
    assert all((multilabel[:, k] != labels).mean() > 0.2 for k in (1, 2))


def test_regression_is_the_standardised_teacher_score(tables: dict[str, Dataset]) -> None:
    y = tables["regression"].y_train
    np.testing.assert_allclose([y.mean(), y.std()], [0.0, 1.0], atol=1e-5)
    labels = tables["multiclass"].y_train
    # the class is the score above its median: a threshold on y agrees except the 1% flips
    threshold = np.median(np.concatenate([y, tables["regression"].y_val]))
    agree = ((y > threshold) == (labels == 1)).mean()
    assert agree > 0.95


@pytest.mark.parametrize(
    ("task", "target", "metric"),
    [
        ("multiclass", "val_accuracy>=0.9", "val_error"),
        ("binary", "val_auc>=0.95", "val_auc"),
        ("multilabel", "val_exact_match>=0.85", "val_exact_match"),
        ("regression", "val_mse<=0.02", "val_rmse"),
    ],
)
def test_task_and_default_target(task: str, target: str, metric: str) -> None:
    workload = get_workload("tabular", {"task": task})
    assert workload.task.kind is TaskKind(task)
    assert workload.task.default_target == target
    assert metric in workload.metrics
    workload.check_target(Target.parse(target))


def test_unknown_task_is_refused() -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("tabular", {"task": "ranking"})
    assert str(excinfo.value) == (
        "workload option 'task' must be one of multiclass, binary, multilabel, "
        "regression (got 'ranking')"
    )


def test_model_outputs_follow_the_task(tables: dict[str, Dataset]) -> None:
    workload = get_workload("tabular", {"rows": ROWS, "task": "multilabel"})
    data = tables["multilabel"]
    net = workload.build_model("mlp", data)
    assert np.asarray(net(data.x_val[:4])).shape == (4, 3)
