"""`study.adapters.tf_internals` against the installed TensorFlow: the eager context keeps its
global seed in ``_seed`` and the generator of op seeds in ``_rng``, and setting them draws what
`tf.random.set_seed` draws."""

from __future__ import annotations

import random

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from study.adapters import tf_internals


def test_the_eager_context_keeps_its_seed_and_op_seed_generator_privately() -> None:
    tf.random.set_seed(11)
    ctx = context.context()
    assert ctx._seed == 11
    assert isinstance(ctx._rng, random.Random)


def test_setting_the_eager_seed_draws_what_the_public_seed_draws() -> None:
    tf.random.set_seed(7)
    public = tf.random.uniform([4]).numpy()
    tf.random.set_seed(123)
    tf.random.uniform([4])  # the generator moved on
    assert tf_internals.set_eager_seed(7) is True
    np.testing.assert_array_equal(tf.random.uniform([4]).numpy(), public)
