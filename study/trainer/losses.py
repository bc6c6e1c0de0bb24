"""The training objective of a trial: a per-example loss and how labels and outputs are read.

The loss comes, first match wins, from the trial's ``loss`` setting (a built-in name or
``module:callable``), from the user's model when it was compiled with one (``model.loss``), or
from the workload's `Task`. Labels are cast per task kind (int32 class ids for multiclass,
float32 otherwise) and shaped like the outputs; outputs are cast to float32 (mixed precision)
before any loss or metric sees them.

Example: a binary task's labels ``[1, 0, 1]`` become ``[[1.], [0.], [1.]]`` and the loss is
binary cross-entropy from the single logit, one value per example.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.errors import FieldError, UsageError
from study.importing import import_callable
from study.workloads.task import Task, TaskKind

#: A per-example loss: ``fn(labels, outputs)`` -> float32 [batch].
PerExample = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


@dataclass(frozen=True)
class Objective:
    """What the trainer minimises and how it reads labels and outputs.

    ``logits``: classification outputs are logits (threshold 0), else probabilities
    (threshold 0.5); a model compiled with ``binary_crossentropy`` (Keras' default
    ``from_logits=False``) outputs probabilities. ``source`` says where the loss came from
    (``task``, ``trial`` or ``model``) and ``name`` what it is, for logging.
    """

    kind: TaskKind
    per_example: PerExample
    logits: bool
    outputs: int
    name: str
    source: str

    @property
    def label_dtype(self) -> tf.DType:
        return tf.int32 if self.kind is TaskKind.MULTICLASS else tf.float32

    def labels(self, y: tf.Tensor) -> tf.Tensor:
        """Labels cast and shaped for the loss: [batch] class ids, else [batch, outputs]."""
        y = tf.cast(y, self.label_dtype)
        if self.kind is TaskKind.MULTICLASS:
            return tf.reshape(y, [-1])
        return tf.reshape(y, [-1, self.outputs])

    def labels_array(self, y: np.ndarray, *, where: str) -> np.ndarray:
        """`labels` for a whole in-memory array, checked; ``where`` names it in errors."""
        n = int(y.shape[0])
        per_example = int(np.prod(y.shape[1:], dtype=np.int64))
        expected = 1 if self.kind is TaskKind.MULTICLASS else self.outputs
        if per_example != expected:
            what = "class ids" if self.kind is TaskKind.MULTICLASS else f"{expected} value(s)"
            raise UsageError(
                f"{where}: a {self.kind.value} task needs {what} per example, got labels of "
                f"shape {tuple(y.shape)} for a model with {self.outputs} output(s)"
            )
        dtype = np.int32 if self.kind is TaskKind.MULTICLASS else np.float32
        shape = (n,) if self.kind is TaskKind.MULTICLASS else (n, self.outputs)
        return np.asarray(y).astype(dtype).reshape(shape)

    def outputs_of(self, out: tf.Tensor) -> tf.Tensor:
        """Model outputs as float32 (a mixed-precision model outputs float16/bfloat16)."""
        return tf.cast(out, tf.float32)


#: What a ``module:callable`` loss must be.
_EXPECTED = "a per-example loss fn(y_true, y_pred)"


def objective(task: Task, model: keras.Model, outputs: int, loss: str | None = None) -> Objective:
    """The objective of a trial: ``loss`` (the trial's setting), else the model's compiled loss,
    else the task's.

    Raises:
        FieldError: on ``loss``, a loss that cannot be imported, is not callable or does not
            suit the task; on ``model``, a model compiled with several losses.
    """
    if loss is not None:
        task = task.with_loss(loss)
        return _from_task(task, outputs, source="trial")
    compiled = getattr(model, "loss", None) if getattr(model, "compiled", False) else None
    if compiled is not None:
        return _from_compiled(task, compiled, outputs)
    return _from_task(task, outputs, source="task")


def _from_task(task: Task, outputs: int, *, source: str) -> Objective:
    loss = task.loss
    if callable(loss):
        fn, name = _per_example(loss), _name_of(loss)
    elif ":" in loss:
        fn, name = _per_example(import_callable(loss, field="loss", expected=_EXPECTED)), loss
    else:
        fn, name = _builtin(loss), loss
    return Objective(task.kind, fn, task.from_logits, outputs, name, source)


def _builtin(name: str) -> PerExample:
    if name == "sparse_categorical_crossentropy":
        return lambda y, out: keras.losses.sparse_categorical_crossentropy(y, out, from_logits=True)
    if name == "binary_crossentropy":
        return lambda y, out: keras.losses.binary_crossentropy(y, out, from_logits=True)
    if name == "mse":
        return keras.losses.mean_squared_error
    if name == "mae":
        return keras.losses.mean_absolute_error
    if name == "huber":
        return keras.losses.huber
    raise FieldError("loss", value=name, detail=f"unknown built-in loss {name!r}")  # checked


def _from_compiled(task: Task, loss: Any, outputs: int) -> Objective:
    """A model compiled with one loss: a name, a function or a `keras.losses.Loss`."""
    if isinstance(loss, (list, tuple, dict)):
        raise FieldError(
            "model",
            detail=f"the model is compiled with several losses ({_describe(loss)}); compile "
            "it with one loss for its one output, or leave it uncompiled to use the task's",
        )
    try:
        resolved = keras.losses.get(loss)
    except (ValueError, TypeError) as exc:
        raise FieldError(
            "model", detail=f"cannot use the model's compiled loss {loss!r} ({exc})"
        ) from exc
    if resolved is None:
        return _from_task(task, outputs, source="task")
    logits = _from_logits(resolved, default=task.from_logits)
    return Objective(task.kind, _per_example(resolved), logits, outputs, _describe(loss), "model")


def _from_logits(loss: Any, *, default: bool) -> bool:
    """Whether a Keras loss reads logits: its config's ``from_logits`` (a Loss object) or the
    default of its ``from_logits`` argument (a loss function such as ``binary_crossentropy``)."""
    if isinstance(loss, keras.losses.Loss):
        return bool(loss.get_config().get("from_logits", default))
    try:
        parameter = inspect.signature(loss).parameters.get("from_logits")
    except (TypeError, ValueError):
        return default
    return default if parameter is None else bool(parameter.default)


def _per_example(fn: Callable[..., Any]) -> PerExample:
    """One float32 value per example from a loss function or `keras.losses.Loss` (its
    unreduced ``call``); extra axes are averaged, like Keras' losses over the last axis."""
    call = _autographed(fn.call if isinstance(fn, keras.losses.Loss) else fn)

    def per_example(y: tf.Tensor, out: tf.Tensor) -> tf.Tensor:
        values = tf.cast(call(y, out), tf.float32)
        if values.shape.rank == 0:
            raise FieldError(
                "loss",
                detail=f"{_name_of(fn)} returned one number for the batch; return one value "
                "per example (the trainer sums them and divides by the global batch)",
            )
        if values.shape.rank > 1:
            values = tf.reduce_mean(values, axis=list(range(1, values.shape.rank)))
        return values

    return per_example


def _autographed(call: Callable[..., Any]) -> Callable[..., Any]:
    """A user's loss as AutoGraph runs it in a compiled function (Python ``if`` and ``for`` on
    tensors become graph control flow), since the trainer traces its own compiled functions
    without AutoGraph (`study.trainer.graph_loops`); Keras' and TensorFlow's losses, and this
    module's, are called as they are."""
    module = getattr(call, "__module__", None) or type(call).__module__
    if module.partition(".")[0] in ("keras", "tensorflow", "study"):
        return call
    try:
        return tf.autograph.to_graph(call)
    except Exception:  # not convertible (a builtin, a callable object): called as it is
        return call


def _name_of(fn: Any) -> str:
    if isinstance(fn, str):
        return fn
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{module}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def _describe(loss: Any) -> str:
    if isinstance(loss, str):
        return loss
    if isinstance(loss, keras.losses.Loss):
        return loss.name
    if isinstance(loss, dict):
        return ", ".join(f"{k}: {_describe(v)}" for k, v in loss.items())
    if isinstance(loss, (list, tuple)):
        return ", ".join(_describe(v) for v in loss)
    return _name_of(loss)
