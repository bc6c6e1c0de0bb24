"""One BLAS thread for the analysis: its linear algebra is small (a dozen parameters, a few
hundred trials), where OpenBLAS' threads cost far more than they share.

Measured here (2 cores, scipy 1.17, OpenBLAS 0.3): one L-BFGS-B fit of 11 bounded parameters
takes 20 ms with OpenBLAS' default threads and 0.7 ms with one, and the idle threads spin on
the other core. `one_blas_thread` limits BLAS to one thread while a decorated function runs
(threadpoolctl, the scikit-learn project's library) and gives the caller's setting back
afterwards, so a notebook's own NumPy keeps its threads.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

import threadpoolctl

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_controller: threadpoolctl.ThreadpoolController | None = None


def _blas() -> threadpoolctl.ThreadpoolController:
    """The BLAS libraries loaded in this process, found once (finding them takes ~2 ms; the
    analysis modules import NumPy and SciPy, and so load theirs, before the first call)."""
    global _controller
    with _lock:
        if _controller is None:
            _controller = threadpoolctl.ThreadpoolController()
        return _controller


def find_blas() -> None:
    """Find this process's BLAS libraries now, ahead of `one_blas_thread`'s first call (13-20
    ms in a process that has imported TensorFlow: many libraries to look through)."""
    _blas()


def one_blas_thread(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` run with BLAS limited to one thread (nested calls keep the limit)."""

    @functools.wraps(func)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with _blas().limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return limited


@contextlib.contextmanager
def one_blas_thread_everywhere() -> Iterator[None]:
    """BLAS limited to one thread for every thread of the process while the block runs; call
    it from the main thread. Measured here (OpenBLAS 0.3.30, pthreads): once the main thread
    has set BLAS's threads, a limit that another thread sets (`one_blas_thread`) does not hold
    there, and a fit of the model in a worker or background thread took 2-6 s instead of 0.3 s
    (`study.runner.engine` runs its threads inside this)."""
    with _blas().limit(limits=1, user_api="blas"):
        yield
