"""Validation metrics computed in graph, exactly, over the whole validation set.

An `Evaluator` is a fold over validation chunks inside one compiled call: `start` makes the
running sums (float64), `update` adds one chunk, `finish` turns the sums into the task's
metrics. Nothing is approximated: ROC AUC is the Mann-Whitney statistic on the collected scores
(ties count half, micro-averaged over labels for multi-label tasks), every other metric a ratio
of exact sums. A compiled user model's own metrics (``model.compile(metrics=...)``) are reset,
updated per chunk and read through Keras' public ``reset_metrics``, ``compute_metrics`` and
``get_metrics_result`` in the same call.

Example: a binary task with metrics loss, accuracy, error and auc reports
``{"val_loss": 0.41, "val_accuracy": 0.83, "val_error": 0.17, "val_auc": 0.9}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from study.errors import UsageError
from study.trainer.losses import Objective
from study.workloads.task import Metric, Task, TaskKind, direction_of

#: Which built-in metric kinds each task kind can report.
SUPPORTED: dict[TaskKind, frozenset[str]] = {
    TaskKind.MULTICLASS: frozenset({"loss", "accuracy", "error", "exact_match"}),
    TaskKind.BINARY: frozenset({"loss", "accuracy", "error", "exact_match", "auc"}),
    TaskKind.MULTILABEL: frozenset({"loss", "accuracy", "error", "exact_match", "auc"}),
    TaskKind.REGRESSION: frozenset({"loss", "mse", "rmse", "mae"}),
}

_SUMS = ("examples", "loss", "correct", "exact", "squared", "absolute", "elements")


class Evaluator:
    """The task's built-in metrics plus a compiled model's own, as one in-graph fold.

    Raises:
        UsageError: a metric kind the task kind cannot report (e.g. auc for regression).
    """

    def __init__(self, objective: Objective, metrics: tuple[Metric, ...], model: Any = None):
        self.objective = objective
        self.builtin = tuple(m for m in metrics if m.kind != "keras")
        self.keras_names = tuple(m.name for m in metrics if m.kind == "keras")
        self.model = model if self.keras_names else None
        supported = SUPPORTED[objective.kind]
        for metric in self.builtin:
            if metric.kind not in supported:
                raise UsageError(
                    f"metric {metric.key!r} ({metric.kind}) cannot be computed for a "
                    f"{objective.kind.value} task; it supports {', '.join(sorted(supported))}"
                )
        self.auc = any(m.kind == "auc" for m in self.builtin)

    @property
    def keys(self) -> tuple[str, ...]:
        """The reported names, in order: built-in metrics, then the model's own."""
        return tuple(m.key for m in self.builtin) + tuple(f"val_{n}" for n in self.keras_names)

    # -- the fold ------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Zero sums (and empty score arrays when AUC is reported); resets the model's metrics."""
        if self.model is not None:
            self.model.reset_metrics()
        state: dict[str, Any] = {k: tf.constant(0.0, tf.float64) for k in _SUMS}
        if self.auc:
            state["scores"] = tf.TensorArray(
                tf.float32, size=0, dynamic_size=True, infer_shape=False
            )
            state["positive"] = tf.TensorArray(
                tf.bool, size=0, dynamic_size=True, infer_shape=False
            )
            state["chunks"] = tf.constant(0, tf.int32)
        return state

    def update(self, state: dict[str, Any], y: tf.Tensor, out: tf.Tensor) -> dict[str, Any]:
        """Add one chunk: ``y`` prepared labels, ``out`` float32 outputs."""
        kind, new = self.objective.kind, dict(state)
        f64 = lambda t: tf.cast(t, tf.float64)  # noqa: E731 - local shorthand
        new["examples"] = state["examples"] + f64(tf.shape(out)[0])
        new["loss"] = state["loss"] + tf.reduce_sum(f64(self.objective.per_example(y, out)))
        if kind is TaskKind.MULTICLASS:
            right = tf.equal(tf.argmax(out, -1, output_type=tf.int32), y)
            new["correct"] = state["correct"] + tf.reduce_sum(f64(right))
            new["exact"] = new["correct"]
        elif kind is TaskKind.REGRESSION:
            diff = f64(out) - f64(y)
            new["squared"] = state["squared"] + tf.reduce_sum(tf.square(diff))
            new["absolute"] = state["absolute"] + tf.reduce_sum(tf.abs(diff))
            new["elements"] = state["elements"] + f64(tf.size(diff))
        else:
            threshold = 0.0 if self.objective.logits else 0.5
            positive = y > 0.5
            right = tf.equal(out > threshold, positive)
            new["correct"] = state["correct"] + tf.reduce_sum(tf.reduce_mean(f64(right), -1))
            new["exact"] = state["exact"] + tf.reduce_sum(f64(tf.reduce_all(right, -1)))
            if self.auc:
                i = state["chunks"]
                new["scores"] = state["scores"].write(i, tf.reshape(out, [-1]))
                new["positive"] = state["positive"].write(i, tf.reshape(positive, [-1]))
                new["chunks"] = i + 1
        if self.model is not None:
            self.model.compute_metrics(None, y, out, None)
        return new

    def finish(self, state: Mapping[str, Any]) -> tf.Tensor:
        """Every metric of `keys`, in order, as one float64 vector (one fetch to the host)."""
        n = state["examples"]
        values: dict[str, tf.Tensor] = {
            "loss": state["loss"] / n,
            "accuracy": state["correct"] / n,
            "error": 1.0 - state["correct"] / n,
            "exact_match": state["exact"] / n,
            "mse": state["squared"] / state["elements"],
            "mae": state["absolute"] / state["elements"],
            "rmse": tf.sqrt(state["squared"] / state["elements"]),
        }
        if self.auc:
            values["auc"] = exact_auc(state["scores"].concat(), state["positive"].concat())
        out = [values[m.kind] for m in self.builtin]
        if self.model is not None:
            results = self.model.get_metrics_result()
            out += [tf.cast(results[name], tf.float64) for name in self.keras_names]
        return tf.stack(out) if out else tf.zeros([0], tf.float64)


def exact_auc(scores: tf.Tensor, positive: tf.Tensor) -> tf.Tensor:
    """ROC AUC of 1-D ``scores`` against boolean ``positive``, exactly (float64).

    The Mann-Whitney statistic: (sum of the positives' ranks - P(P+1)/2) / (P N), tied scores
    sharing their mean rank, so a tie between a positive and a negative counts half. NaN when
    one class is absent. Example: scores [0.1, 0.4, 0.35, 0.8], positive [F, F, T, T] -> 0.75.
    """
    scores = tf.reshape(scores, [-1])
    positive = tf.reshape(positive, [-1])
    order = tf.argsort(scores, stable=True)
    ordered = tf.gather(scores, order)
    labels = tf.cast(tf.gather(positive, order), tf.float64)
    n = tf.size(ordered)
    # Tie groups of the sorted scores: a new group starts where the value changes.
    starts = tf.concat([[True], tf.not_equal(ordered[1:], ordered[:-1])], 0)[:n]
    group = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    ranks = tf.cast(tf.range(1, n + 1), tf.float64)
    mean_rank = tf.gather(
        tf.math.segment_sum(ranks, group) / tf.math.segment_sum(tf.ones_like(ranks), group),
        group,
    )
    n_pos = tf.reduce_sum(labels)
    n_neg = tf.cast(n, tf.float64) - n_pos
    u = tf.reduce_sum(mean_rank * labels) - n_pos * (n_pos + 1.0) / 2.0
    pairs = n_pos * n_neg
    return tf.where(pairs > 0, u / pairs, tf.constant(float("nan"), tf.float64))


def model_metrics(model: keras.Model, objective: Objective, y: Any, x: Any) -> tuple[str, ...]:
    """The names a compiled model's own metrics report, found by running them once eagerly on a
    few examples (``x``, ``y``) and resetting them; empty for an uncompiled model.

    Keras reports them under the names ``model.fit`` uses (``accuracy``, ``auc``, ``mae``);
    ``loss`` is left out (the trainer reports its loss itself).
    """
    if not getattr(model, "compiled", False):
        return ()
    out = objective.outputs_of(model(x, training=False))
    model.compute_metrics(None, objective.labels(tf.convert_to_tensor(y)), out, None)
    names = tuple(k for k in model.get_metrics_result() if k != "loss")
    model.reset_metrics()
    return names


def reported_task(task: Task, keras_names: tuple[str, ...]) -> Task:
    """The task with a compiled model's metrics added (as ``val_<name>``, direction by name);
    a name the task already reports keeps the task's built-in computation."""
    extra = tuple(Metric(n, "keras", direction_of(n)) for n in keras_names)
    return task.with_metrics(extra)
