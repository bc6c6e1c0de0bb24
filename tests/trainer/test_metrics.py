"""Tests for study.trainer.metrics: exact in-graph metrics against numpy and scikit-learn."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import roc_auc_score

from study.errors import UsageError
from study.trainer.losses import Objective, objective
from study.trainer.metrics import Evaluator, exact_auc, model_metrics, reported_task
from study.workloads.task import Direction, Metric, Task, TaskKind
from tests.trainer.conftest import huber, sigmoid_bce, softmax_ce

N = 53  # folded in uneven chunks of 7 (the last one has 4 examples)


def fold(evaluator: Evaluator, y: np.ndarray, out: np.ndarray, chunk: int = 7) -> dict:
    """Every metric of ``evaluator`` over (y, out) in chunks inside one compiled call."""
    labels = evaluator.objective.labels(tf.constant(y))
    outputs = tf.constant(out, tf.float32)

    @tf.function
    def evaluate() -> tf.Tensor:
        state = evaluator.start()
        for i in tf.range(0, len(y), chunk):
            state = evaluator.update(state, labels[i : i + chunk], outputs[i : i + chunk])
        return evaluator.finish(state)

    return dict(zip(evaluator.keys, evaluate().numpy().tolist(), strict=True))


def task_objective(task: Task, outputs: int) -> Objective:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(outputs)])
    return objective(task, model, outputs)


# Exact ROC AUC


@pytest.mark.parametrize("distinct", [3, 10, 1000])
def test_exact_auc_matches_sklearn_with_and_without_ties(distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    scores = rng.integers(0, distinct, 400).astype(np.float32)  # few values: many ties
    positive = rng.random(400) < 0.3 + 0.04 * scores / distinct

    got = float(exact_auc(tf.constant(scores), tf.constant(positive)))

    assert got == pytest.approx(roc_auc_score(positive, scores), abs=1e-12)


def test_exact_auc_docstring_example_and_edge_cases() -> None:
    scores = tf.constant([0.1, 0.4, 0.35, 0.8])
    assert float(exact_auc(scores, tf.constant([False, False, True, True]))) == 0.75
    assert float(exact_auc(tf.ones([6]), tf.constant([True, False] * 3))) == 0.5  # all tied
    assert np.isnan(float(exact_auc(scores, tf.constant([True] * 4))))  # no negatives


# Every task kind against numpy references


def test_multiclass_metrics() -> None:
    rng = np.random.default_rng(1)
    out = rng.normal(size=(N, 4)).astype(np.float32)
    y = rng.integers(0, 4, N)
    evaluator = Evaluator(task_objective(Task.multiclass(), 4), Task.multiclass().metrics)

    got = fold(evaluator, y, out)

    accuracy = np.mean(out.argmax(axis=1) == y)
    assert got["val_loss"] == pytest.approx(softmax_ce(out, y).mean(), rel=1e-6)
    assert got["val_accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert got["val_error"] == pytest.approx(1 - accuracy, abs=1e-12)
    assert 0 < accuracy < 1


@pytest.mark.parametrize("label_shape", [(N,), (N, 1)])
def test_binary_metrics_with_labels_of_either_shape(label_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(2)
    out = np.round(rng.normal(size=(N, 1)), 1).astype(np.float32)  # rounded: tied scores
    y = (rng.random(N) < 1 / (1 + np.exp(-2 * out[:, 0]))).astype(np.int64)
    task = Task.binary()
    evaluator = Evaluator(task_objective(task, 1), task.metrics)

    got = fold(evaluator, y.reshape(label_shape), out)

    accuracy = np.mean((out[:, 0] > 0) == (y == 1))
    assert evaluator.keys == ("val_loss", "val_accuracy", "val_error", "val_auc")
    assert got["val_loss"] == pytest.approx(sigmoid_bce(out, y[:, None]).mean(), rel=1e-6)
    assert got["val_accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert got["val_error"] == pytest.approx(1 - accuracy, abs=1e-12)
    assert got["val_auc"] == pytest.approx(roc_auc_score(y, out[:, 0]), abs=1e-12)


def test_binary_probabilities_threshold_at_one_half() -> None:
    """A model compiled with Keras' binary_crossentropy outputs probabilities."""
    out = np.array([[0.2], [0.6], [0.45], [0.9]], np.float32)
    y = np.array([0, 1, 1, 1])
    goal = Objective(TaskKind.BINARY, lambda y, o: tf.zeros(tf.shape(o)[:1]), False, 1, "p", "t")

    got = fold(Evaluator(goal, Task.binary().metrics), y, out, chunk=3)

    assert got["val_accuracy"] == 0.75  # 0.45 < 0.5 is wrong; logits would call all 4 positive
    assert got["val_auc"] == 1.0


def test_multilabel_metrics_micro_averaged() -> None:
    rng = np.random.default_rng(3)
    out = np.round(rng.normal(size=(N, 3)), 1).astype(np.float32)
    y = (rng.random((N, 3)) < 1 / (1 + np.exp(-out))).astype(np.float32)
    task = Task.multilabel()
    evaluator = Evaluator(task_objective(task, 3), task.metrics)

    got = fold(evaluator, y, out)

    right = (out > 0) == (y > 0.5)
    assert got["val_loss"] == pytest.approx(sigmoid_bce(out, y).mean(), rel=1e-6)
    assert got["val_accuracy"] == pytest.approx(right.mean(), abs=1e-12)
    assert got["val_exact_match"] == pytest.approx(right.all(axis=1).mean(), abs=1e-12)
    assert got["val_auc"] == pytest.approx(roc_auc_score(y, out, average="micro"), abs=1e-12)


@pytest.mark.parametrize(
    ("loss", "reference"),
    [
        ("mse", lambda o, y: ((o - y) ** 2).mean(axis=1)),
        ("mae", lambda o, y: np.abs(o - y).mean(axis=1)),
        ("huber", huber),
    ],
)
def test_regression_metrics(loss: str, reference: Any) -> None:
    rng = np.random.default_rng(4)
    out = rng.normal(size=(N, 2)).astype(np.float32) * 2
    y = rng.normal(size=(N, 2)).astype(np.float32)
    task = Task.regression(loss=loss)
    evaluator = Evaluator(task_objective(task, 2), task.metrics)

    got = fold(evaluator, y, out)

    diff = out.astype(np.float64) - y
    assert evaluator.keys == ("val_loss", "val_mse", "val_rmse", "val_mae")
    assert got["val_loss"] == pytest.approx(reference(out, y).mean(), rel=1e-6)
    assert got["val_mse"] == pytest.approx((diff**2).mean(), rel=1e-6)
    assert got["val_rmse"] == pytest.approx(np.sqrt((diff**2).mean()), rel=1e-6)
    assert got["val_mae"] == pytest.approx(np.abs(diff).mean(), rel=1e-6)


def test_one_output_regression_takes_labels_of_shape_n() -> None:
    out = np.array([[1.0], [2.0], [4.0]], np.float32)
    y = np.array([1.0, 1.0, 1.0], np.float32)
    evaluator = Evaluator(task_objective(Task.regression(), 1), Task.regression().metrics)

    assert fold(evaluator, y, out, chunk=2)["val_mse"] == pytest.approx((0 + 1 + 9) / 3)


def test_metric_the_task_cannot_report_is_rejected() -> None:
    task = Task.regression()
    with pytest.raises(UsageError, match=r"'val_auc' \(auc\) cannot be computed for a regression"):
        Evaluator(task_objective(task, 1), (Metric.builtin("auc"),))


# A compiled model's own metrics


def compiled_model(metrics: list[Any]) -> keras.Model:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(loss="mse", metrics=metrics)
    return model


def test_model_metrics_are_named_as_keras_reports_them() -> None:
    model = compiled_model(["mae", keras.metrics.RootMeanSquaredError(name="root_mse")])
    goal = objective(Task.regression(), model, 1)

    names = model_metrics(model, goal, np.zeros((2, 1), np.float32), np.zeros((2, 2), np.float32))
    task = reported_task(Task.regression(), names)

    assert names == ("mae", "root_mse")
    assert task.keys == ("val_loss", "val_mse", "val_rmse", "val_mae", "val_root_mse")
    assert task.metric("val_root_mse") == Metric("root_mse", "keras", Direction.MINIMIZE)
    assert model_metrics(keras.Sequential([keras.layers.Dense(1)]), goal, None, None) == ()


def test_model_metrics_fold_over_the_whole_set() -> None:
    model = compiled_model([keras.metrics.MeanSquaredLogarithmicError(name="msle")])
    task = reported_task(Task.regression(), ("msle",))
    goal = objective(task, model, 1)
    rng = np.random.default_rng(5)
    out = rng.random((N, 1)).astype(np.float32)
    y = rng.random((N, 1)).astype(np.float32)

    got = fold(Evaluator(goal, task.metrics, model), y, out)
    again = fold(Evaluator(goal, task.metrics, model), y, out)  # reset at every evaluation

    msle = np.mean((np.log1p(out.astype(np.float64)) - np.log1p(y)) ** 2)
    assert got["val_msle"] == pytest.approx(msle, rel=1e-5)
    assert again["val_msle"] == got["val_msle"]
