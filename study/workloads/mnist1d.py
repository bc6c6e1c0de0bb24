"""MNIST-1D (Greydanus 2020), generated locally and cached as ``.npz``; never downloaded.

The cache lives in ``$STUDY_CACHE_DIR`` or ``~/.cache/study``, one file per (samples, seed),
written atomically so that concurrent trial workers can share it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from study.paths import cache_dir
from study.workloads.base import Dataset, Workload
from study.workloads.files import read_arrays, write_arrays
from study.workloads.options import Option, integer

if TYPE_CHECKING:  # pragma: no cover
    import keras

_CACHE_VERSION = 1  # bump when the generation changes, so old cache files are not reused
_KEYS = ("x", "y", "x_test", "y_test")


class Mnist1DWorkload(Workload):
    """MNIST-1D: 40-long signals, 10 classes, 80/20 split; options ``samples`` and ``seed``.

    Example: ``Mnist1DWorkload(samples=10000)`` gives 8,000 training and 2,000 validation examples.
    """

    name: ClassVar[str] = "mnist1d"
    models: ClassVar[tuple[str, ...]] = ("mlp", "cnn")
    default_target: ClassVar[str] = "val_accuracy>=0.6"
    option_specs: ClassVar[dict[str, Option]] = {
        "samples": Option(10_000, integer(minimum=100)),
        "seed": Option(42, integer()),
    }

    @property
    def cache_path(self) -> Path:
        """The ``.npz`` file holding this configuration's arrays."""
        o = self.options
        return cache_dir() / f"mnist1d-v{_CACHE_VERSION}-samples{o['samples']}-seed{o['seed']}.npz"

    def load(self) -> Dataset:
        """Read the cached arrays, or generate and cache them."""
        arrays = read_arrays(self.cache_path, _KEYS, "MNIST-1D")
        if arrays is None:
            arrays = _generate(self.options["samples"], self.options["seed"])
            write_arrays(self.cache_path, arrays, "MNIST-1D")
        return Dataset(
            x_train=arrays["x"].astype(np.float32, copy=False),
            y_train=arrays["y"].astype(np.int32, copy=False),
            x_val=arrays["x_test"].astype(np.float32, copy=False),
            y_val=arrays["y_test"].astype(np.int32, copy=False),
            num_classes=10,
        )

    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """``mlp``: Dense(100, relu) x 2 -> Dense(10).

        ``cnn``: reshape to (40, 1) -> 3 x Conv1D(25, kernel 5, stride 2, same, relu) -> Flatten
        -> Dense(10).
        """
        import keras

        model = self.check_model(model)
        if model == "mlp":
            body = [
                keras.layers.Dense(100, activation="relu"),
                keras.layers.Dense(100, activation="relu"),
            ]
        else:
            conv = {"kernel_size": 5, "strides": 2, "padding": "same", "activation": "relu"}
            body = [
                keras.layers.Reshape((data.input_shape[0], 1)),
                keras.layers.Conv1D(25, **conv),
                keras.layers.Conv1D(25, **conv),
                keras.layers.Conv1D(25, **conv),
                keras.layers.Flatten(),
            ]
        return keras.Sequential(
            [keras.Input(shape=data.input_shape), *body, keras.layers.Dense(data.num_classes)],
            name=f"mnist1d_{model}",
        )


def _generate(samples: int, seed: int) -> dict[str, np.ndarray]:
    """Run ``mnist1d.data.make_dataset`` (it reseeds the global RNGs; their state is restored)."""
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.num_samples = samples
    args.seed = seed
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return {
        "x": np.asarray(data["x"], dtype=np.float32),
        "y": np.asarray(data["y"], dtype=np.int32),
        "x_test": np.asarray(data["x_test"], dtype=np.float32),
        "y_test": np.asarray(data["y_test"], dtype=np.int32),
    }
