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
(`study.runner.spawning`).

The garbage collector is off while the server imports, as Python's documentation advises
before forking without exec: TensorFlow's import makes some 400,000 objects, none of them
garbage, and the collector's full passes over them took 0.5-0.65 s of its 3.7 s (measured on
2 cores), on the path of every study's first trial. What the server imported is then frozen
(`study.runner.heap.settle`, `gc.freeze`: no worker's collector traverses TensorFlow's objects, nor copies them on write)
and the collector turned on again, for the server and every worker it forks. No collection
runs first: after the import it found nothing to free and took 0.19 s.
"""

from __future__ import annotations

import contextlib
import signal

from study.runner import heap  # the collector's pause, as a run's host uses it

with heap.paused():  # before the imports below: see the module docstring
    import study.runner.worker  # noqa: F401  (imports no TensorFlow itself)
    from study.deps import quiet_stderr, without_keras_extras

    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    with quiet_stderr(), without_keras_extras(), contextlib.suppress(Exception):
        import tensorflow  # noqa: F401

    heap.settle()  # frozen, the collector on again
