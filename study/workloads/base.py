"""The workload contract: data plus models, framework-neutral until a model is built.

A workload module must not import TensorFlow at module level: `validate()` runs in the light CLI
process, `load()` and `build_model()` run in a trainer worker.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from study.config.rules import FieldError
from study.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import keras


@dataclass(frozen=True)
class Dataset:
    """In-memory arrays: float32 (or int32 token ids) features, int32 class labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


class Workload(abc.ABC):
    """A dataset and the models that can be trained on it.

    Subclasses set ``name``, ``models`` (the first is the default) and ``default_target``, take
    their options as keyword arguments (validated in ``__init__``, errors name the option), and
    implement ``load`` and ``build_model``. Models output logits; the trainer applies sparse
    categorical cross-entropy and reports ``val_loss``, ``val_accuracy`` and ``val_error``.
    """

    name: ClassVar[str] = ""
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"
    #: The validation metrics a trial of this workload reports (what a target may name).
    metrics: ClassVar[tuple[str, ...]] = ("val_loss", "val_accuracy", "val_error")

    def __init__(self, **options: Any) -> None:
        if options:
            raise UsageError(f"workload {self.name!r} takes no option {sorted(options)[0]!r}")
        self._options: dict[str, Any] = {}

    @property
    def options(self) -> Mapping[str, Any]:
        """The options this workload was built with (for logging and cache keys)."""
        return dict(self._options)

    def check_model(self, model: str | None) -> str:
        """Return the model name to use, or raise `UsageError` listing the known ones."""
        if model is None:
            return self.models[0]
        if model not in self.models:
            raise UsageError(
                f"--model: unknown model {model!r} for workload {self.name!r}; "
                f"choose from {', '.join(self.models)}"
            )
        return model

    def check_target(self, metric: str) -> None:
        """Raise `FieldError` on ``target`` unless ``metric`` is one this workload reports.

        Example: ``nosuchmetric`` on MNIST-1D: "target: unknown metric 'nosuchmetric'; workload
        'mnist1d' reports val_loss, val_accuracy, val_error".
        """
        if metric not in self.metrics:
            raise FieldError(
                "target",
                "",
                metric,
                detail=f"unknown metric {metric!r}; workload {self.name!r} reports "
                f"{', '.join(self.metrics)}",
            )

    def validate(self) -> None:  # noqa: B027 - optional hook
        """Cheap checks run before any training (files exist, columns present); no TensorFlow."""

    @abc.abstractmethod
    def load(self) -> Dataset:
        """Generate or read the data. Deterministic; nothing is downloaded."""

    @abc.abstractmethod
    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """Build (and call once so that its weights exist) the named model; runs in a strategy scope."""
