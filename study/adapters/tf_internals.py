"""TensorFlow's private names `study` uses: the eager context's seed.

Checked at TensorFlow 2.18 (the oldest ``pyproject.toml`` allows) through 2.21; the contract
test is ``tests/adapters/test_tf_internals.py``.
"""

from __future__ import annotations

import random


def set_eager_seed(seed: int) -> bool:
    """Set TensorFlow's global (eager) seed to ``seed`` without clearing the kernel cache that
    `tf.random.set_seed` clears; whether it could (False: the caller uses the public call).

    Uses ``tensorflow.python.eager.context.context()`` and its ``_seed`` (the global seed) and
    ``_rng`` (the `random.Random` that op seeds are drawn from), the two attributes
    ``Context._set_global_seed`` sets besides clearing the cache. Fallback: when either
    attribute is missing, nothing is set and False is returned.
    """
    from tensorflow.python.eager import context

    ctx = context.context()
    if not (hasattr(ctx, "_rng") and hasattr(ctx, "_seed")):
        return False
    ctx._seed = seed
    ctx._rng = random.Random(seed)
    return True
