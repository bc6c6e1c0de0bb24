"""What the forkserver imports once, before it forks trainer workers (`study.runner.spawning`).

TensorFlow (without Keras' scikit-learn and matplotlib extras, quietly, as a worker imports it)
and the worker's own modules: each forked worker then starts with them imported. Importing
TensorFlow does not start its runtime, so every worker still sets its own devices before it
initialises. Without TensorFlow installed nothing is preloaded, and a worker says which extra
to install, as a spawned one does.

The server also ignores SIGTERM (`multiprocessing` has it ignore SIGINT): a signal to the
process group must not end it, since its death would end every worker it forked. It exits
when the process that started it does. Each worker restores SIGTERM's default
(`study.runner.spawning`).
"""

from __future__ import annotations

import contextlib
import signal

import study.runner.worker  # noqa: F401  (imports no TensorFlow itself)
from study.deps import quiet_stderr, without_keras_extras

signal.signal(signal.SIGTERM, signal.SIG_IGN)

with quiet_stderr(), without_keras_extras(), contextlib.suppress(ImportError):
    import tensorflow  # noqa: F401
