"""Half of every fit's descents in a helper process, while one trial trains at a time.

With one worker, every decision of an allocation by steps and every designed proposal waits
for a fit of the model of every trial, and the trainer idles meanwhile: one of a 2-core
machine's cores does nothing. `installed` starts a helper process (forked from the run's
TensorFlow server, `study.runner.spawning`) and installs it in `study.analysis.descents`: a fit
then sends the second half of its starting points to the helper and runs the first half here,
at once. The results come back in the starting points' order and each descent is the same
computation wherever it runs, so the fit is the same, bit for bit, as without the helper.

A fit asked for while the helper is busy (a fit made ahead beside the decision's), or after it
died, runs all its descents here; a helper that dies mid-fit has its half run here again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from scipy import optimize

from study.analysis import descents
from study.analysis.likelihood import Trials
from study.analysis.threads import one_blas_thread
from study.runner import spawning

__all__ = ["FitHelper", "installed", "wanted"]

#: ``STUDY_FIT_HELPER=0`` (or ``false``, ``no``, ``off``) keeps every descent in the process
#: that fits.
ENV = "STUDY_FIT_HELPER"


class FitHelper:
    """A helper process that runs descents (`study.analysis.descents.descend`) it is sent;
    called as a `study.analysis.descents.Descents`."""

    def __init__(self) -> None:
        ctx = spawning.context()
        self._conn, child = ctx.Pipe()
        self._process = spawning.process(_serve, (child,), "study-fit-helper")
        self._child = child
        self._started = spawning.start_soon(self._process)  # off the run's path
        self._lock = threading.Lock()
        self.broken = False

    def ready(self) -> bool:
        """Whether the helper process has started (its start failed: `broken`)."""
        if not self._started.done():
            return False
        child, self._child = self._child, None
        if child is not None:
            child.close()  # its copy lives in the helper
            self.broken = self.broken or self._started.exception() is not None
        return not self.broken

    def __call__(
        self, data: Trials, bounds: descents.Bounds, starts: Sequence[np.ndarray]
    ) -> list[optimize.OptimizeResult]:
        if not self._lock.acquire(blocking=False):
            return descents.descend(data, bounds, starts)
        if not self.ready():
            self._lock.release()
            return descents.descend(data, bounds, starts)
        try:
            half = (len(starts) + 1) // 2
            here, away = list(starts[:half]), list(starts[half:])
            try:
                self._conn.send((data, list(bounds), away))
            except (OSError, ValueError):
                self.broken = True
                return descents.descend(data, bounds, starts)
            mine = descents.descend(data, bounds, here)
            try:
                theirs = [optimize.OptimizeResult(x=x, fun=fun) for x, fun in self._conn.recv()]
            except (EOFError, OSError):
                self.broken = True
                theirs = descents.descend(data, bounds, away)
            return mine + theirs
        finally:
            self._lock.release()

    @property
    def pid(self) -> int | None:
        """The helper's process id, once it has started."""
        return self._process.pid if self.ready() else None

    def close(self) -> None:
        """Ask the helper to end and wait a little for it (then end it)."""
        with contextlib.suppress(Exception):
            self._started.result(timeout=30)
        if not self.ready():
            self._conn.close()
            return
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(None)
        self._process.join(timeout=5)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)
        self._conn.close()


@one_blas_thread
def _serve(conn: Any) -> None:
    """The helper's loop: descents in, ``(x, fun)`` of each out, until None or the pipe closes
    (the run that started it ended). Ctrl-C, which reaches the whole process group, is the
    run's to handle: the helper ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    descents.warm_soon()
    while True:
        try:
            asked = conn.recv()
        except (EOFError, OSError):
            return
        if asked is None:
            return
        data, bounds, starts = asked
        results = descents.descend(data, bounds, starts)
        conn.send([(r.x, float(r.fun)) for r in results])


def wanted(workers: int) -> bool:
    """Whether a run of ``workers`` trials at a time gets a helper: one worker, a core to spare
    beside it, and not switched off (``STUDY_FIT_HELPER=0``, ``false``, ``no`` or ``off``)."""
    switched_off = os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off")
    return workers == 1 and (os.cpu_count() or 1) > 1 and not switched_off


@contextlib.contextmanager
def installed(workers: int) -> Iterator[FitHelper | None]:
    """A helper installed for the run's fits when `wanted`, closed and uninstalled at the end;
    none when it could not be started (the fits then run here, as without)."""
    helper = None
    if wanted(workers):
        with contextlib.suppress(OSError, RuntimeError):
            helper = FitHelper()
    before = descents.install(helper) if helper is not None else None
    try:
        yield helper
    finally:
        if helper is not None:
            descents.install(before)
            helper.close()
