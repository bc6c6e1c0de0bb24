"""The host's garbage collector while a run starts: paused, then what the start made frozen.

A run's host imports MLflow, SQLAlchemy, Optuna, pandas, SciPy and numba (some of it in warm-up
threads while the trainer's server imports TensorFlow): some 400,000 objects, none of them
garbage. Python's collector traverses them all in each full pass, and the growing heap
triggers several during the start, each longer than the last (18 ms to 310 ms measured on 2
cores, about 0.8 s in all); one often fell between the preflight and the first trial, where
the run waits on the host alone.

`paused` turns the collector off for the start (reference counting still frees what is not
in a cycle); `settle`, called once the preflight has passed, freezes every object that exists
(`gc.freeze`: later passes skip them, as ``study.runner.preload`` does in the trainer's
server) and turns the collector back on. Leaving `paused` turns it back on in any case, so a
start that fails leaves the process as it found it. The trainer's server pauses its own
collector with them while it imports TensorFlow (`study.runner.preload`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused", "settle"]

#: Whether `paused` turned the collector off and nothing has turned it on since.
_paused_here = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The collector off inside (left as it is if it was off already); on again on exit."""
    global _paused_here
    if not gc.isenabled():  # the caller's choice: not ours to change
        yield
        return
    gc.disable()
    _paused_here = True
    try:
        yield
    finally:
        _paused_here = False
        gc.enable()


def settle() -> None:
    """Freeze what exists and turn the collector on, if `paused` turned it off (else
    nothing)."""
    global _paused_here
    if _paused_here:
        _paused_here = False
        gc.freeze()
        gc.enable()
