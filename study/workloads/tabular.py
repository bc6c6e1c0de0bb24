"""The seed pipeline's table: 10,000 rows x 20 features, min-max normalised, two classes.

Raw features ``offset + scale * u`` with ``u ~ U(-1, 1)`` and scales from 0.01 to 1000, so they
need the normalisation. The label is a fixed "teacher": the sign of a quadratic form
``a1 (u.d1)^2 + a2 (u.d2)^2`` (a1 < 0 < a2, a saddle), thresholded at its median and with 1% of
labels flipped. A linear model stays at chance (~0.5); the MLP below first reaches 0.9 validation
accuracy after 250-650 SGD steps at batch 64, learning rate 0.03-0.1, momentum 0.9, and levels
off at 0.92-0.96.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from study.workloads import float_option, int_option
from study.workloads.base import Dataset, Workload

if TYPE_CHECKING:  # pragma: no cover
    import keras

_TEACHER_SEED = 20_180_811  # fixed: the task is the same function whatever the data seed
_LABEL_NOISE = 0.01


class TabularWorkload(Workload):
    """Synthetic two-class table; options ``rows``, ``features``, ``seed``, ``val_fraction``."""

    name: ClassVar[str] = "tabular"
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"

    def __init__(
        self,
        *,
        rows: int = 10_000,
        features: int = 20,
        seed: int = 0,
        val_fraction: float = 0.2,
    ) -> None:
        super().__init__()
        self._options = {
            "rows": int_option("rows", rows, minimum=100),
            "features": int_option("features", features, minimum=2),
            "seed": int_option("seed", seed, minimum=0),
            "val_fraction": float_option("val_fraction", val_fraction, low=0.0, high=1.0),
        }

    def load(self) -> Dataset:
        """Generate the table; rows are i.i.d., so the last ``val_fraction`` is validation."""
        rows, features = self._options["rows"], self._options["features"]
        rng = np.random.default_rng(self._options["seed"])
        u = rng.uniform(-1.0, 1.0, size=(rows, features))
        scale, offset, score, threshold = _teacher(features)
        y = (score(u) > threshold).astype(np.int32)
        flip = rng.random(rows) < _LABEL_NOISE
        y = np.where(flip, 1 - y, y).astype(np.int32)
        x = _min_max(offset + scale * u).astype(np.float32)
        n_val = min(rows - 1, max(1, round(rows * self._options["val_fraction"])))
        split = rows - n_val
        return Dataset(x[:split], y[:split], x[split:], y[split:], num_classes=2)

    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """``mlp``: Dense(64, relu) x 2 -> Dense(2) logits."""
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


def _teacher(features: int) -> tuple[np.ndarray, np.ndarray, Any, float]:
    """Column scales and offsets, the teacher's score function and its median threshold."""
    rng = np.random.default_rng(_TEACHER_SEED)
    scale = 10.0 ** rng.uniform(-2.0, 3.0, size=features)
    offset = rng.uniform(-5.0, 5.0, size=features) * scale
    directions = rng.standard_normal((features, 2)) * 3.0 / np.sqrt(features)
    weights = np.array([-1.0, 1.0]) * rng.uniform(0.7, 1.0, size=2)

    def score(u: np.ndarray) -> np.ndarray:
        return ((u @ directions) ** 2) @ weights

    reference = rng.uniform(-1.0, 1.0, size=(20_000, features))
    return scale, offset, score, float(np.median(score(reference)))


def _min_max(raw: np.ndarray) -> np.ndarray:
    """Scale each column to [0, 1] (a constant column becomes 0)."""
    low, high = raw.min(axis=0), raw.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (raw - low) / span
