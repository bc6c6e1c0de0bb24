"""The workload contract: data, models and a task, framework-neutral until a model is built.

A workload module must not import TensorFlow at module level: `validate()` and `task` run in the
light CLI process, `load()` and `build_model()` run in a trainer worker. `load()` returns either
in-memory arrays (`Dataset`, the fast path) or `tf.data` factories (`Streams`, for files that do
not fit in memory); the trainer distributes either over the strategy's replicas.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from study.config.target import Target
from study.errors import FieldError, summary_line
from study.importing import find_module, import_callable
from study.workloads.options import Option, resolve_options
from study.workloads.task import Task

if TYPE_CHECKING:  # pragma: no cover
    import keras
    import numpy as np


@dataclass(frozen=True)
class Dataset:
    """In-memory arrays: float32 (or int32 token ids) features and labels.

    Labels follow the task: int32 class ids (multiclass), 0/1 (binary, shape [n]), [n, K] 0/1
    (multilabel) or [n] / [n, K] reals (regression). ``num_classes`` is the number of model
    outputs: classes, 1 for binary, labels or regression targets.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def outputs(self) -> int:
        return self.num_classes


@dataclass(frozen=True)
class Streams:
    """A streamed dataset: `tf.data` factories instead of arrays (files larger than memory).

    ``train(seed, num_shards, shard_index)`` returns one epoch of single ``(x, y)`` examples of
    this shard, in an order drawn from ``seed`` that changes every epoch when repeated (shuffle
    with ``reshuffle_each_iteration=True``); the trainer repeats, batches (per replica, batches
    span epochs), prefetches and distributes it with the strategy's input context.
    ``val()`` returns the validation examples once, in a fixed order; the trainer batches it and
    evaluates every example exactly once. Shapes are per example; ``num_classes`` is the number
    of model outputs (as in `Dataset`).

    ``blocks=True``: both factories yield blocks of rows ``(x[n, ...], y[n])`` of any sizes
    instead of single examples (``train`` shuffled in windows, e.g. with
    `study.workloads.blocks.shuffled_rows`), and the trainer cuts exact batches from them with
    one slice per batch: no per-example `tf.data` work (see `study.workloads.blocks`).
    """

    train: Callable[[int, int, int], Any]
    val: Callable[[], Any]
    input_shape: tuple[int, ...]
    num_classes: int
    train_examples: int
    val_examples: int
    input_dtype: str = "float32"
    blocks: bool = False

    @property
    def outputs(self) -> int:
        return self.num_classes


class Workload(abc.ABC):
    """A dataset and the models that can be trained on it.

    Subclasses set ``name``, ``models`` (the first is the default) and ``default_target``,
    declare their options in ``option_specs`` (name -> `study.workloads.options.Option`: a
    default and a check) and implement ``load`` and ``build_model``; ``__init__`` checks the
    options it is given (errors are `FieldError` on the option) and ``self.options`` holds
    them all. A subclass with checks across options overrides ``__init__(self, **options)``,
    calls ``super().__init__(**options)`` first and raises `FieldError` on the option to change.
    ``task`` says what the model is trained for (loss, metrics, default target); the default is
    multi-class classification from logits. A model name ``module:callable`` is the user's own
    Keras model (see `build`).
    """

    name: ClassVar[str] = ""
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"
    option_specs: ClassVar[Mapping[str, Option]] = {}

    def __init__(self, **options: Any) -> None:
        self._options: dict[str, Any] = resolve_options(self.name, self.option_specs, options)

    @property
    def options(self) -> Mapping[str, Any]:
        """Every option's checked value, defaults included (read-only; logged with each run)."""
        return MappingProxyType(self._options)

    @property
    def task(self) -> Task:
        """What a model of this workload is trained for; override for other tasks."""
        return Task.multiclass(self.default_target)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The validation metrics a trial reports (what a target may name)."""
        return self.task.keys

    def check_model(self, model: str | None) -> str:
        """Return the model name to use, or raise `FieldError` on ``model`` listing the known ones.

        ``module:callable`` (the user's own model) is accepted when the module can be found;
        the callable itself is imported in the trainer.
        """
        if model is None:
            return self.models[0]
        if ":" in model:
            return find_module(model, field="model")
        if model not in self.models:
            raise FieldError(
                "model",
                value=model,
                detail=f"unknown model {model!r} for workload {self.name!r}; "
                f"choose from {', '.join(self.models)}, or give module:callable",
            )
        return model

    def check_target(self, target: Target) -> None:
        """Raise `FieldError` on ``target`` unless it names a reported metric, in its direction.

        Example: ``nosuchmetric>=0.5`` on MNIST-1D: "target: unknown metric 'nosuchmetric';
        workload 'mnist1d' reports val_loss, val_accuracy, val_error".
        """
        self.task.check_target(target, workload=self.name)

    def validate(self) -> None:  # noqa: B027 - optional hook
        """Cheap checks run before any training (files exist, columns present); no TensorFlow."""

    @abc.abstractmethod
    def load(self) -> Dataset | Streams:
        """Generate or read the data. Deterministic; nothing is downloaded."""

    @abc.abstractmethod
    def build_model(self, model: str, data: Dataset | Streams) -> keras.Model:
        """Build (and call once so that its weights exist) the named model; runs in a strategy scope."""

    def build(self, model: str, data: Dataset | Streams) -> keras.Model:
        """The named model, or the user's own: ``module:callable`` is called with the keyword
        arguments it declares among ``input_shape``, ``outputs`` (= ``num_classes``), ``task``
        (the task kind's name) and ``workload`` (this object), and returns a Keras model,
        compiled or not.

        Raises:
            FieldError: on ``model``: the callable cannot be imported, fails, or returns no
                Keras model.
        """
        if ":" not in model:
            return self.build_model(model, data)
        factory = import_callable(model, field="model", expected="a function returning a model")
        offered = {
            "input_shape": tuple(data.input_shape),
            "outputs": data.outputs,
            "num_classes": data.outputs,
            "task": self.task.kind.value,
            "workload": self,
        }
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            kwargs = offered
        else:
            kwargs = {k: v for k, v in offered.items() if k in params}
        try:
            built = factory(**kwargs)
        except Exception as exc:  # user code: say which callable failed and how it was called
            raise FieldError(
                "model",
                value=model,
                detail=f"calling {model}({', '.join(kwargs)}) failed ({summary_line(exc)})",
            ) from exc
        if not _is_keras_model(built):
            raise FieldError(
                "model",
                value=model,
                detail=f"{model!r} returned {type(built).__name__}, not a Keras model; "
                "return a keras.Model (compiled or not)",
            )
        return built


def _is_keras_model(obj: Any) -> bool:
    import keras

    return isinstance(obj, keras.Model)
