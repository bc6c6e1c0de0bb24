"""What the forkserver imports once, before it forks trainer workers (`study.runner.spawning`).

TensorFlow (without Keras' scikit-learn and matplotlib extras, quietly, as a worker imports it)
and the worker's own modules: each forked worker then starts with them imported. Importing
TensorFlow does not start its runtime, so every worker still sets its own devices before it
initialises. Without TensorFlow installed nothing is preloaded, and a worker says which extra
to install, as a spawned one does.
"""

from __future__ import annotations

import contextlib

from study.deps import quiet_stderr, without_keras_extras

with quiet_stderr(), without_keras_extras(), contextlib.suppress(ImportError):
    import tensorflow  # noqa: F401

import study.runner.worker  # noqa: F401
