"""The seed pipeline's table: 10,000 rows x 20 features, min-max normalised, two classes.

Raw features ``offset + scale * u`` with ``u ~ U(-1, 1)`` and scales from 0.01 to 1000, so they
need the normalisation. The label is a fixed "teacher": the sign of a quadratic form
``a1 (u.d1)^2 + a2 (u.d2)^2`` (a1 < 0 < a2, a saddle), thresholded at its median and with 1% of
labels flipped. A linear model stays at chance (~0.5); the MLP below first reaches 0.9 validation
accuracy after 250-650 SGD steps at batch 64, learning rate 0.03-0.1, momentum 0.9, and levels
off at 0.92-0.96.

Option ``task`` trains the same table for each kind of task, so every task can be exercised
without files:

- ``multiclass`` (default): the label as class ids 0/1, two logits.
- ``binary``: the same label as 0/1 floats, one logit; default target ``val_auc>=0.95`` (first
  met after ~250 SGD steps at batch 64, learning rate 0.05, momentum 0.9; levels off at 0.98).
- ``multilabel``: three 0/1 labels: the teacher's label and the signs of its two projections
  ``u.d1`` and ``u.d2`` (1% of each flipped); three logits; default target ``val_exact_match>=0.85``
  (all three right; ~375 steps, levels off at 0.92).
- ``regression``: the teacher's score itself (no threshold, no flips), standardised with the
  training rows' mean and standard deviation; one output; default target ``val_mse<=0.02``
  (~250 steps; levels off at 0.007).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from study.workloads.base import Dataset, Workload
from study.workloads.options import Option, integer, number, tasks
from study.workloads.task import Task, TaskKind

if TYPE_CHECKING:  # pragma: no cover
    import keras

_TEACHER_SEED = 20_180_811  # fixed: the task is the same function whatever the data seed
_LABEL_NOISE = 0.01
TARGET_BINARY = "val_auc>=0.95"
TARGET_MULTILABEL = "val_exact_match>=0.85"
TARGET_REGRESSION = "val_mse<=0.02"
_TARGETS = {
    TaskKind.BINARY: TARGET_BINARY,
    TaskKind.MULTILABEL: TARGET_MULTILABEL,
    TaskKind.REGRESSION: TARGET_REGRESSION,
}


class TabularWorkload(Workload):
    """Synthetic table; options ``rows``, ``features``, ``seed``, ``val_fraction``, ``task``.

    Example: ``TabularWorkload(task="regression").load().y_val`` holds the standardised teacher
    scores of the validation rows; ``.task.default_target`` is ``val_mse<=0.02``.
    """

    name: ClassVar[str] = "tabular"
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"

    option_specs: ClassVar[dict[str, Option]] = {
        "rows": Option(10_000, integer(minimum=100)),
        "features": Option(20, integer(minimum=2)),
        "seed": Option(0, integer()),
        "val_fraction": Option(0.2, number(low=0.0, high=1.0)),
        "task": Option("multiclass", tasks()),
    }

    @property
    def task(self) -> Task:
        """The option's task with its default target (multi-class: ``val_accuracy>=0.9``)."""
        kind = TaskKind(self.options["task"])
        if kind is TaskKind.MULTICLASS:
            return Task.multiclass(self.default_target)
        return Task.named(kind.value, target=_TARGETS[kind])

    def load(self) -> Dataset:
        """Generate the table; rows are i.i.d., so the last ``val_fraction`` is validation.

        Features and the multi-class labels are the same whatever the task (same seed).
        """
        rows, features = self.options["rows"], self.options["features"]
        rng = np.random.default_rng(self.options["seed"])
        u = rng.uniform(-1.0, 1.0, size=(rows, features))
        teacher = _teacher(features)
        scores = teacher.score(u)
        y = (scores > teacher.threshold).astype(np.int32)
        flip = rng.random(rows) < _LABEL_NOISE
        y = np.where(flip, 1 - y, y).astype(np.int32)
        x = _min_max(teacher.offset + teacher.scale * u).astype(np.float32)
        n_val = min(rows - 1, max(1, round(rows * self.options["val_fraction"])))
        split = rows - n_val
        kind = TaskKind(self.options["task"])
        outputs = {TaskKind.MULTICLASS: 2, TaskKind.BINARY: 1, TaskKind.MULTILABEL: 3}
        if kind is TaskKind.BINARY:
            targets: np.ndarray = y.astype(np.float32)
        elif kind is TaskKind.MULTILABEL:
            signs = (u @ teacher.directions > 0).astype(np.int32)
            flips = rng.random(signs.shape) < _LABEL_NOISE
            signs = np.where(flips, 1 - signs, signs)
            targets = np.column_stack([y, signs]).astype(np.float32)
        elif kind is TaskKind.REGRESSION:
            mean, std = scores[:split].mean(), scores[:split].std()
            targets = ((scores - mean) / std).astype(np.float32)
        else:
            targets = y
        return Dataset(
            x[:split],
            targets[:split],
            x[split:],
            targets[split:],
            num_classes=outputs.get(kind, 1),
        )

    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """``mlp``: Dense(64, relu) x 2 -> Dense(outputs): 2 logits, 1 (binary), 3
        (multi-label) or 1 real (regression)."""
        import keras

        self.check_model(model)
        return keras.Sequential(
            [
                keras.Input(shape=data.input_shape),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(data.num_classes),
            ],
            name="tabular_mlp",
        )


@dataclass(frozen=True)
class _Teacher:
    """Column scales and offsets, the two projection directions, the score's weights and its
    median threshold."""

    scale: np.ndarray
    offset: np.ndarray
    directions: np.ndarray
    weights: np.ndarray
    threshold: float

    def score(self, u: np.ndarray) -> np.ndarray:
        return ((u @ self.directions) ** 2) @ self.weights


def _teacher(features: int) -> _Teacher:
    """The fixed teacher for a number of features (same whatever the data seed)."""
    rng = np.random.default_rng(_TEACHER_SEED)
    scale = 10.0 ** rng.uniform(-2.0, 3.0, size=features)
    offset = rng.uniform(-5.0, 5.0, size=features) * scale
    directions = rng.standard_normal((features, 2)) * 3.0 / np.sqrt(features)
    weights = np.array([-1.0, 1.0]) * rng.uniform(0.7, 1.0, size=2)
    teacher = _Teacher(scale, offset, directions, weights, 0.0)
    reference = rng.uniform(-1.0, 1.0, size=(20_000, features))
    return replace(teacher, threshold=float(np.median(teacher.score(reference))))


def _min_max(raw: np.ndarray) -> np.ndarray:
    """Scale each column to [0, 1] (a constant column becomes 0)."""
    low, high = raw.min(axis=0), raw.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (raw - low) / span
