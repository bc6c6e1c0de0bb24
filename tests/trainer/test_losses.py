"""Tests for study.trainer.losses: where a trial's loss comes from and what it computes."""

from __future__ import annotations

import textwrap
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from study.config.rules import FieldError
from study.errors import UsageError
from study.trainer.losses import objective
from study.workloads.task import Task, TaskKind
from tests.trainer.conftest import huber, sigmoid_bce, softmax_ce

LOSS_MODULE = """
    import tensorflow as tf


    def weighted_mse(y_true, y_pred):
        return tf.reduce_mean(3.0 * tf.square(y_true - y_pred), axis=-1)


    def batch_mean(y_true, y_pred):
        return tf.reduce_mean(tf.square(y_true - y_pred))


    def clipped_when_large(y_true, y_pred):
        # Python control flow on a tensor: AutoGraph makes it a graph `cond`.
        error = tf.abs(y_true - y_pred)
        if tf.reduce_max(error) > 1.0:
            error = tf.minimum(error, 1.0)
        return tf.reduce_mean(error, axis=-1)


    NOT_CALLABLE = 3
"""


@pytest.fixture(scope="module")
def loss_module(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A user's loss module on sys.path; its name."""
    directory = tmp_path_factory.mktemp("losses")
    name = f"user_losses_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(LOSS_MODULE), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(directory))
        yield name


def model(outputs: int, compile_loss: object = None) -> keras.Model:
    m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(outputs)])
    if compile_loss is not None:
        m.compile(loss=compile_loss)
    return m


def values(goal, y: np.ndarray, out: np.ndarray) -> np.ndarray:
    return goal.per_example(goal.labels(tf.constant(y)), tf.constant(out)).numpy()


RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(5, 3)).astype(np.float32)


def test_multiclass_is_sparse_cross_entropy_from_logits() -> None:
    y = np.array([0, 2, 1, 1, 0])
    goal = objective(Task.multiclass(), model(3), 3)

    assert goal.labels(tf.constant(y.astype(np.float64))).dtype == tf.int32
    np.testing.assert_allclose(values(goal, y, LOGITS), softmax_ce(LOGITS, y), rtol=1e-6)
    assert (goal.source, goal.name, goal.logits) == (
        "task",
        "sparse_categorical_crossentropy",
        True,
    )


@pytest.mark.parametrize("shape", [(5,), (5, 1)])
def test_binary_is_cross_entropy_from_one_logit(shape: tuple[int, ...]) -> None:
    y = np.array([1, 0, 0, 1, 1], np.int64)
    goal = objective(Task.binary(), model(1), 1)

    labels = goal.labels(tf.constant(y.reshape(shape)))
    assert labels.dtype == tf.float32 and labels.shape == (5, 1)
    np.testing.assert_allclose(
        values(goal, y.reshape(shape), LOGITS[:, :1]),
        sigmoid_bce(LOGITS[:, :1], y[:, None]),
        rtol=1e-6,
    )


def test_multilabel_is_cross_entropy_per_label() -> None:
    y = (RNG.random((5, 3)) > 0.5).astype(np.float32)
    goal = objective(Task.multilabel(), model(3), 3)

    np.testing.assert_allclose(values(goal, y, LOGITS), sigmoid_bce(LOGITS, y), rtol=1e-6)


@pytest.mark.parametrize(
    ("loss", "reference"),
    [
        ("mse", lambda o, y: ((o - y) ** 2).mean(axis=1)),
        ("mae", lambda o, y: np.abs(o - y).mean(axis=1)),
        ("huber", huber),
    ],
)
def test_regression_losses_on_raw_outputs(loss: str, reference) -> None:
    y = RNG.normal(size=(5, 3)).astype(np.float32)
    goal = objective(Task.regression(loss=loss), model(3), 3)

    assert goal.logits is False
    np.testing.assert_allclose(values(goal, y, LOGITS), reference(LOGITS, y), rtol=1e-6)


def test_trial_loss_overrides_the_task_and_is_checked() -> None:
    goal = objective(Task.regression(), model(3), 3, loss="mae")

    assert (goal.name, goal.source) == ("mae", "trial")
    with pytest.raises(FieldError, match="loss 'mse' does not suit a multiclass task"):
        objective(Task.multiclass(), model(3), 3, loss="mse")


def test_custom_loss_from_a_module(loss_module: str) -> None:
    y = RNG.normal(size=(5, 3)).astype(np.float32)
    goal = objective(Task.regression(), model(3), 3, loss=f"{loss_module}:weighted_mse")

    assert goal.name == f"{loss_module}:weighted_mse"
    np.testing.assert_allclose(values(goal, y, LOGITS), 3 * ((LOGITS - y) ** 2).mean(1), rtol=1e-6)


def test_a_custom_loss_with_python_control_flow_runs_in_a_compiled_function(
    loss_module: str,
) -> None:
    """The trainer traces its compiled functions without AutoGraph; a user's loss still gets
    it, so its ``if`` on a tensor works inside them and takes the branch the values choose."""
    goal = objective(Task.regression(), model(3), 3, loss=f"{loss_module}:clipped_when_large")
    compiled = tf.function(goal.per_example, autograph=False)
    y = np.zeros((5, 3), np.float32)
    small, large = 0.1 * LOGITS / np.abs(LOGITS).max(), 5.0 * LOGITS / np.abs(LOGITS).max()

    np.testing.assert_allclose(compiled(y, small), np.abs(small).mean(1), rtol=1e-6)
    np.testing.assert_allclose(compiled(y, large), np.minimum(np.abs(large), 1).mean(1), rtol=1e-6)


def test_custom_loss_object_in_a_python_task() -> None:
    class Scaled:
        def __call__(self, y_true: tf.Tensor, y_pred: tf.Tensor) -> tf.Tensor:
            return 2.0 * tf.abs(y_true - y_pred)  # [batch, outputs]: averaged per example

    y = RNG.normal(size=(5, 3)).astype(np.float32)
    task = Task.regression().with_loss(Scaled())
    goal = objective(task, model(3), 3)

    np.testing.assert_allclose(values(goal, y, LOGITS), 2 * np.abs(LOGITS - y).mean(1), rtol=1e-6)
    assert goal.name.endswith("Scaled")


def test_keras_loss_object_is_used_unreduced() -> None:
    y = RNG.normal(size=(5, 3)).astype(np.float32)
    task = Task.regression().with_loss(keras.losses.Huber(delta=0.5))

    np.testing.assert_allclose(
        values(objective(task, model(3), 3), y, LOGITS), huber(LOGITS, y, 0.5), rtol=1e-6
    )


def test_loss_returning_one_number_is_a_usage_error(loss_module: str) -> None:
    goal = objective(Task.regression(), model(3), 3, loss=f"{loss_module}:batch_mean")

    with pytest.raises(UsageError, match="returned one number for the batch"):
        values(goal, LOGITS, LOGITS)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_x1:f", "^loss: cannot import module 'no_such_module_x1'"),
        ("{module}:missing", "has no attribute 'missing'"),
        ("{module}:NOT_CALLABLE", "is not callable"),
        (":f", "expected module:callable"),
    ],
)
def test_bad_custom_losses(loss_module: str, spec: str, message: str) -> None:
    with pytest.raises(FieldError, match=message) as excinfo:
        objective(Task.regression(), model(3), 3, loss=spec.format(module=loss_module))
    assert excinfo.value.field == "loss"


# A compiled model's loss


def test_compiled_loss_is_used_with_its_from_logits() -> None:
    y = np.array([1, 0, 0, 1, 1])
    probabilities = 1 / (1 + np.exp(-LOGITS[:, :1]))

    by_name = objective(Task.binary(), model(1, "binary_crossentropy"), 1)
    by_object = objective(
        Task.binary(), model(1, keras.losses.BinaryCrossentropy(from_logits=True)), 1
    )

    assert (by_name.source, by_name.name, by_name.logits) == ("model", "binary_crossentropy", False)
    np.testing.assert_allclose(
        values(by_name, y, probabilities), sigmoid_bce(LOGITS[:, :1], y[:, None]), rtol=1e-4
    )
    assert by_object.logits is True
    np.testing.assert_allclose(
        values(by_object, y, LOGITS[:, :1]), sigmoid_bce(LOGITS[:, :1], y[:, None]), rtol=1e-6
    )


def test_trial_loss_beats_the_compiled_one() -> None:
    goal = objective(Task.regression(), model(3, "mse"), 3, loss="mae")

    assert (goal.name, goal.source) == ("mae", "trial")


def test_model_compiled_with_several_losses_is_refused() -> None:
    with pytest.raises(UsageError, match="compiled with several losses"):
        objective(Task.regression(), model(3, ["mse", "mae"]), 3)


# Labels


def test_labels_array_is_checked_against_the_task() -> None:
    goal = objective(Task.multilabel(), model(3), 3)

    assert goal.labels_array(np.ones((4, 3), np.int64), where="y").dtype == np.float32
    with pytest.raises(UsageError, match=r"training labels: a multilabel task needs 3 value\(s\)"):
        goal.labels_array(np.ones((4, 2)), where="training labels")
    multiclass = objective(Task.multiclass(), model(3), 3)
    assert multiclass.labels_array(np.ones((4, 1)), where="y").shape == (4,)
    with pytest.raises(UsageError, match="needs class ids per example"):
        multiclass.labels_array(np.ones((4, 3)), where="y")
    assert TaskKind(goal.kind) is TaskKind.MULTILABEL
