"""Keras' private names `study` uses: its global seed state and a model's nested layers.

Checked at Keras 3.5 (the oldest ``pyproject.toml`` allows) through 3.15; the contract test is
``tests/adapters/test_keras_internals.py``.
"""

from __future__ import annotations

from typing import Any


def set_global_seed_state(seed: int) -> None:
    """Set Keras' global random seed to ``seed`` and drop its global seed generator, what
    `keras.utils.set_random_seed` does to Keras' own state (without the TensorFlow seed it
    also sets, which clears TensorFlow's kernel cache: `study.adapters.tf_internals`).

    Uses ``keras.src.backend.common.global_state.set_global_attribute`` with the names
    ``keras.src.utils.rng_utils.GLOBAL_RANDOM_SEED`` and
    ``keras.src.random.seed_generator.GLOBAL_SEED_GENERATOR`` (Keras 3.10 and later). Keras
    before 3.10 keeps no global seed of its own (its `set_random_seed` sets only Python's,
    NumPy's and TensorFlow's): then nothing is set. Otherwise no fallback: an ImportError or
    AttributeError names the moved module, and the contract test fails first.
    """
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    if not hasattr(rng_utils, "GLOBAL_RANDOM_SEED"):  # Keras < 3.10
        return

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)


def nested_layers(model: Any) -> list[Any]:
    """Every layer inside ``model``, nested ones included (not the model itself).

    Uses ``Layer._flatten_layers(include_self=False, recursive=True)``, the walk Keras itself
    uses for ``model.submodules``-like traversals (the public ``model.layers`` lists only the
    top level). No fallback: an AttributeError names it, and the contract test fails first.
    """
    return list(model._flatten_layers(include_self=False, recursive=True))
