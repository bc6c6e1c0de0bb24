"""scikit-learn's bundled 8x8 digits (1,797 images, no download), flattened to 64 features."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from study.workloads.base import Dataset, Workload
from study.workloads.options import Option, integer, number

if TYPE_CHECKING:  # pragma: no cover
    import keras


class DigitsWorkload(Workload):
    """Digits scaled to [0, 1], seeded stratified split; options ``seed`` and ``val_fraction``."""

    name: ClassVar[str] = "digits"
    models: ClassVar[tuple[str, ...]] = ("mlp",)
    default_target: ClassVar[str] = "val_accuracy>=0.9"
    option_specs: ClassVar[dict[str, Option]] = {
        "seed": Option(0, integer()),
        "val_fraction": Option(0.2, number(low=0.0, high=1.0)),
    }

    def load(self) -> Dataset:
        """Load the bundled images; pixel values 0..16 become 0..1."""
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        x, y = load_digits(return_X_y=True)
        x_train, x_val, y_train, y_val = train_test_split(
            (x / 16.0).astype(np.float32),
            y.astype(np.int32),
            test_size=self.options["val_fraction"],
            stratify=y,
            random_state=self.options["seed"],
        )
        return Dataset(x_train, y_train, x_val, y_val, num_classes=10)

    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """``mlp``: Dense(64, relu) -> Dense(10) logits."""
        import keras

        self.check_model(model)
        return keras.Sequential(
            [
                keras.Input(shape=data.input_shape),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(data.num_classes),
            ],
            name="digits_mlp",
        )
