"""`study.adapters.keras_internals` against the installed Keras: its global seed state lives in
``keras.src`` under the names used, and a model's nested layers come from ``_flatten_layers``."""

from __future__ import annotations

import inspect
import random

import keras
import numpy as np
from keras.src.backend.common import global_state
from keras.src.random import seed_generator
from keras.src.utils import rng_utils

from study.adapters import keras_internals, tf_internals


def _fresh_kernel() -> np.ndarray:
    layer = keras.layers.Dense(5)
    layer.build((None, 3))
    return layer.kernel.numpy()


def test_the_global_seed_state_is_set_under_its_private_names() -> None:
    keras_internals.set_global_seed_state(5)
    if not hasattr(rng_utils, "GLOBAL_RANDOM_SEED"):  # Keras < 3.10: no seed state of its own
        assert "global_state" not in inspect.getsource(rng_utils.set_random_seed)
        return
    assert global_state.get_global_attribute(rng_utils.GLOBAL_RANDOM_SEED) == 5
    assert global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR) is None


def test_reseeding_through_the_doors_initialises_as_set_random_seed_does() -> None:
    keras.utils.set_random_seed(3)
    public = _fresh_kernel()
    keras.utils.set_random_seed(99)
    _fresh_kernel()
    assert tf_internals.set_eager_seed(3)
    keras_internals.set_global_seed_state(3)
    random.seed(3)
    np.random.seed(3)
    np.testing.assert_array_equal(_fresh_kernel(), public)


def test_nested_layers_include_those_of_inner_models() -> None:
    assert hasattr(keras.layers.Layer, "_flatten_layers")
    inner = keras.Sequential([keras.layers.Dense(4), keras.layers.BatchNormalization()])
    model = keras.Sequential([keras.Input((3,)), inner, keras.layers.Dense(1)])
    found = keras_internals.nested_layers(model)
    assert model not in found
    assert inner in found and inner.layers[1] in found  # the BatchNorm inside the inner model
    assert sum(isinstance(x, keras.layers.BatchNormalization) for x in found) == 1
