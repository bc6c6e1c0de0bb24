"""What a workload is trained for: its loss, its validation metrics and its default target.

One framework-neutral declaration (AlgoPerf's workload contract): the trainer turns it into a
TensorFlow loss and in-graph metrics, the CLI and the study-file parser check targets against it
without importing TensorFlow. Every metric is reported as ``val_<name>`` and computed exactly on
the whole validation set.

Example::

    task = Task.binary()                     # one logit, binary cross-entropy
    task.keys                                # ('val_loss', 'val_accuracy', 'val_error', 'val_auc')
    task.check_target(Target.parse("val_auc>=0.9"), workload="tabular")   # fine
    task.check_target(Target.parse("val_loss>=0.3"), workload="tabular")  # FieldError: direction
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from study.config.target import Target
from study.errors import FieldError
from study.importing import split_spec

__all__ = [
    "LOSSES",
    "METRIC_KINDS",
    "Direction",
    "Metric",
    "Task",
    "TaskKind",
    "direction_of",
]


class TaskKind(str, enum.Enum):
    """What the model predicts, and so how labels and outputs are read."""

    MULTICLASS = "multiclass"  # int class ids; K logits
    BINARY = "binary"  # 0/1 labels; one logit
    MULTILABEL = "multilabel"  # K 0/1 labels per example; K logits
    REGRESSION = "regression"  # K real targets; K outputs


class Direction(str, enum.Enum):
    """Which way a metric improves."""

    MAXIMIZE = "max"
    MINIMIZE = "min"


#: How each built-in metric is computed (by the trainer) and which way it improves.
METRIC_KINDS: dict[str, tuple[Direction, str]] = {
    "loss": (Direction.MINIMIZE, "mean per-example loss of the task's loss"),
    "accuracy": (
        Direction.MAXIMIZE,
        "fraction right: argmax for multiclass, logit > 0 for binary and per label for multilabel",
    ),
    "error": (Direction.MINIMIZE, "1 - accuracy"),
    "auc": (Direction.MAXIMIZE, "exact ROC AUC (Mann-Whitney ranks, ties count half)"),
    "exact_match": (Direction.MAXIMIZE, "fraction of examples with every label right"),
    "mse": (Direction.MINIMIZE, "mean squared error"),
    "mae": (Direction.MINIMIZE, "mean absolute error"),
    "rmse": (Direction.MINIMIZE, "square root of the mean squared error"),
}

#: Built-in losses by name: the task kinds each suits.
LOSSES: dict[str, tuple[TaskKind, ...]] = {
    "sparse_categorical_crossentropy": (TaskKind.MULTICLASS,),
    "binary_crossentropy": (TaskKind.BINARY, TaskKind.MULTILABEL),
    "mse": (TaskKind.REGRESSION,),
    "mae": (TaskKind.REGRESSION,),
    "huber": (TaskKind.REGRESSION,),
}

_LOWER_IS_BETTER = re.compile(
    r"(loss|error|mse|mae|rmse|msle|mape|rms|crossentropy|hinge|deviance|perplexity|logcosh"
    r"|kld|kl_divergence|poisson)"
)


def direction_of(name: str) -> Direction:
    """The direction of a metric known only by name (e.g. a compiled Keras model's metric).

    Example: ``direction_of("val_mean_squared_error")`` is MINIMIZE, ``direction_of("val_auc")``
    MAXIMIZE.
    """
    bare = name.removeprefix("val_").removeprefix("val/")
    if bare in METRIC_KINDS:
        return METRIC_KINDS[bare][0]
    return Direction.MINIMIZE if _LOWER_IS_BETTER.search(bare.lower()) else Direction.MAXIMIZE


@dataclass(frozen=True)
class Metric:
    """One validation metric, reported as ``val_<name>``.

    ``kind`` is a key of `METRIC_KINDS`, or ``"keras"`` for a metric object of a compiled user
    model (computed by that object, over the whole validation set).
    """

    name: str
    kind: str
    direction: Direction

    @property
    def key(self) -> str:
        return f"val_{self.name}"

    @classmethod
    def builtin(cls, kind: str) -> Metric:
        return cls(kind, kind, METRIC_KINDS[kind][0])


def _metrics(*kinds: str) -> tuple[Metric, ...]:
    return tuple(Metric.builtin(k) for k in kinds)


@dataclass(frozen=True)
class Task:
    """A loss, the metrics to report and the target a study uses when none is given.

    ``loss`` is a key of `LOSSES`, ``"module:callable"`` (a per-example loss ``fn(y_true,
    y_pred)`` returning one value per example, imported in the trainer) or, for a workload
    written in Python, the callable itself. ``from_logits``: outputs are logits (classification).
    """

    kind: TaskKind
    loss: str | Callable[..., Any]
    metrics: tuple[Metric, ...]
    default_target: str

    # -- the built-in tasks ------------------------------------------------------------------
    @classmethod
    def multiclass(cls, target: str = "val_accuracy>=0.9") -> Task:
        """Class ids, K logits, sparse categorical cross-entropy (today's default)."""
        metrics = _metrics("loss", "accuracy", "error")
        return cls(TaskKind.MULTICLASS, "sparse_categorical_crossentropy", metrics, target)

    @classmethod
    def binary(cls, target: str = "val_auc>=0.9") -> Task:
        """0/1 labels, one logit, binary cross-entropy; adds exact ROC AUC."""
        metrics = _metrics("loss", "accuracy", "error", "auc")
        return cls(TaskKind.BINARY, "binary_crossentropy", metrics, target)

    @classmethod
    def multilabel(cls, target: str = "val_accuracy>=0.9") -> Task:
        """K independent 0/1 labels, K logits, binary cross-entropy per label."""
        metrics = _metrics("loss", "accuracy", "error", "exact_match", "auc")
        return cls(TaskKind.MULTILABEL, "binary_crossentropy", metrics, target)

    @classmethod
    def regression(cls, loss: str = "mse", target: str = "val_mse<=0.1") -> Task:
        """Real targets; loss ``mse``, ``mae`` or ``huber``; reports MSE, RMSE and MAE."""
        metrics = _metrics("loss", "mse", "rmse", "mae")
        task = cls(TaskKind.REGRESSION, "mse", metrics, target)
        return task.with_loss(loss)

    @classmethod
    def named(cls, kind: str, **kwargs: Any) -> Task:
        """The built-in task of a kind name; raises `FieldError` on ``task`` for an unknown one."""
        makers = {
            "multiclass": cls.multiclass,
            "binary": cls.binary,
            "multilabel": cls.multilabel,
            "regression": cls.regression,
        }
        if kind not in makers:
            raise FieldError(
                "task",
                "",
                kind,
                detail=f"unknown task {kind!r}; choose from {', '.join(makers)}",
            )
        return makers[kind](**kwargs)

    # -- derived -----------------------------------------------------------------------------
    @property
    def keys(self) -> tuple[str, ...]:
        """The reported metric names, e.g. ``('val_loss', 'val_accuracy', 'val_error')``."""
        return tuple(m.key for m in self.metrics)

    @property
    def from_logits(self) -> bool:
        return self.kind is not TaskKind.REGRESSION

    @property
    def custom_loss(self) -> bool:
        return callable(self.loss) or ":" in str(self.loss)

    def metric(self, key: str) -> Metric | None:
        return next((m for m in self.metrics if m.key == key), None)

    def with_loss(self, loss: str | Callable[..., Any]) -> Task:
        """This task trained with another loss: a built-in name that suits the kind,
        ``module:callable`` or a callable. ``val_loss`` then reports that loss.

        Raises:
            FieldError: ``loss``, a built-in name that does not exist or does not suit the task.
        """
        if isinstance(loss, str) and ":" not in loss:
            if loss not in LOSSES:
                raise FieldError(
                    "loss",
                    "",
                    loss,
                    detail=f"unknown loss {loss!r}; choose from {', '.join(LOSSES)} "
                    "or give module:callable (a per-example loss fn(y_true, y_pred))",
                )
            if self.kind not in LOSSES[loss]:
                suits = ", ".join(k for k, kinds in LOSSES.items() if self.kind in kinds)
                raise FieldError(
                    "loss",
                    "",
                    loss,
                    detail=f"loss {loss!r} does not suit a {self.kind.value} task; use {suits} "
                    "or module:callable",
                )
        elif isinstance(loss, str):
            split_spec(loss, field="loss")  # imported where the trial trains
        return replace(self, loss=loss)

    def with_metrics(self, extra: tuple[Metric, ...]) -> Task:
        """This task with more metrics (a compiled model's); a name already reported is kept once."""
        known = set(self.keys)
        return replace(self, metrics=self.metrics + tuple(m for m in extra if m.key not in known))

    def with_target(self, target: str) -> Task:
        return replace(self, default_target=target)

    def check_target(self, target: Target, *, workload: str, open_metrics: bool = False) -> None:
        """Raise `FieldError` on ``target`` unless it names a reported metric, in its direction.

        ``open_metrics``: the model may report more metrics than the task (a user's model,
        compiled with its own metrics, checked when it is built); an unknown name then passes
        here and its direction is read from its name (`direction_of`).

        Examples: ``nosuchmetric>=0.5`` on MNIST-1D: "target: unknown metric 'nosuchmetric';
        workload 'mnist1d' reports val_loss, val_accuracy, val_error"; ``val_loss>=0.3``:
        "target: 'val_loss>=0.3' waits for val_loss to rise, but lower val_loss is better;
        write val_loss<=0.3".
        """
        metric = self.metric(target.metric)
        if metric is None and open_metrics:
            metric = Metric(
                target.metric.removeprefix("val_"), "keras", direction_of(target.metric)
            )
        if metric is None:
            raise FieldError(
                "target",
                "",
                target.metric,
                detail=f"unknown metric {target.metric!r}; workload {workload!r} reports "
                f"{', '.join(self.keys)}",
            )
        if target.maximize != (metric.direction is Direction.MAXIMIZE):
            better = "higher" if metric.direction is Direction.MAXIMIZE else "lower"
            way = "rise" if target.maximize else "fall"
            op = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}[target.op]
            raise FieldError(
                "target",
                "",
                str(target),
                detail=f"{str(target)!r} waits for {target.metric} to {way}, but {better} "
                f"{target.metric} is better; write {target.metric}{op}{target.threshold:g}",
            )

    def describe(self) -> dict[str, str]:
        """Flat strings for logging (MLflow params): task, loss and metric names."""
        loss = self.loss if isinstance(self.loss, str) else _callable_name(self.loss)
        return {"task": self.kind.value, "loss": loss, "metrics": ",".join(self.keys)}


def _callable_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}:{getattr(fn, '__qualname__', type(fn).__name__)}"
