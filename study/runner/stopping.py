"""Stopping a run from outside: Ctrl-C (SIGINT) and SIGTERM end it the same clean way.

Python turns SIGINT into `KeyboardInterrupt`; `sigterm_interrupts` turns SIGTERM (what
``kill``, Kubernetes and Slurm send) into `Terminated`, a `KeyboardInterrupt`, so one code path
closes the running trials as ``interrupted`` and their MLflow runs as KILLED. `exit_status`
gives the shell's convention: 130 after SIGINT, 143 after SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from study.errors import ExitCode


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's `KeyboardInterrupt`."""


def exit_status(interrupt: KeyboardInterrupt) -> ExitCode:
    """128 + the signal: 143 for `Terminated` (SIGTERM), 130 for Ctrl-C (SIGINT)."""
    signum = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
    return ExitCode(128 + int(signum))


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, the first SIGTERM raises `Terminated` in the main thread and later ones
    are ignored, so the clean-up it starts runs to its end (outside the main thread: no
    change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
