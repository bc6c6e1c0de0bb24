"""What the forkserver imports once, before it forks trainer workers (`study.runner.spawning`).

TensorFlow (without Keras' scikit-learn and matplotlib extras, quietly, as a worker imports it)
and the worker's own modules: each forked worker then starts with them imported. Importing
TensorFlow does not start its runtime, so every worker still sets its own devices before it
initialises. If TensorFlow cannot be imported (not installed, or broken) nothing is preloaded:
each worker imports it itself and says what is wrong (which extra to install), as a spawned
one does, rather than the server failing to start.

The server also ignores SIGTERM (`multiprocessing` has it ignore SIGINT): a signal to the
process group must not end it, since its death would end every worker it forked. It exits
when the process that started it does. Each worker restores SIGTERM's default
(`study.runner.spawning`). What the server imported is frozen (`gc.freeze`): no worker's
garbage collector traverses TensorFlow's objects again.
"""

from __future__ import annotations

import contextlib
import gc
import signal

import study.runner.worker  # noqa: F401  (imports no TensorFlow itself)
from study.deps import quiet_stderr, without_keras_extras

signal.signal(signal.SIGTERM, signal.SIG_IGN)

with quiet_stderr(), without_keras_extras(), contextlib.suppress(Exception):
    import tensorflow  # noqa: F401

# What every worker inherits, a worker's garbage collector never traverses (nor copies on
# write): frozen, as Python's documentation advises before forking without exec.
gc.collect()
gc.freeze()
