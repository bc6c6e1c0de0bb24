"""Starting trainer worker processes: from one long-lived thread, forked from a TensorFlow server.

**One thread.** A trainer worker asks Linux to kill it when its parent dies
(``PR_SET_PDEATHSIG``, so that no orphan keeps training), and Linux sends that signal when the
*thread* that started the process ends, not the process. The study engine and ``study branch``
start workers from their trial threads; a thread whose work ran out ended while a peer still
used the worker it had started, and that worker was killed mid-trial ("trainer worker died").
Every worker is therefore started from this module's one thread, which lives as long as the
process.

**One TensorFlow import.** On Linux, workers are forked from `multiprocessing`'s forkserver,
which imports TensorFlow once (`study.runner.preload`) before it forks anything: a worker is
ready in a fraction of a second instead of paying TensorFlow's import (2-5 CPU-seconds) each
time. TensorFlow's runtime is not started in the server, so each worker still configures its
own devices (logical CPUs, ``TF_CONFIG``) before it initialises. Elsewhere workers are spawned
(a fresh interpreter each). A forked worker would inherit the server's environment and standard
streams, fixed when the server started; `process` hands it the caller's current ones instead,
so it behaves as a spawned worker would (``STUDY_CACHE_DIR`` set since, stderr redirected).
Every worker writes its temporary files into a directory of its own, removed when it ends
(`study.runner.scratch`: TensorFlow's autograph would leave its generated modules behind).
The server ignores SIGTERM and SIGINT, so a signal to the process group leaves it alone (its
death would end every worker); it exits when its parent does.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing import reduction
from typing import Any

from study.runner.scratch import own_tempdir

#: What the forkserver imports once, before it forks any worker.
PRELOAD = "study.runner.preload"
#: ``STUDY_START_METHOD=spawn`` spawns every worker afresh (the default off Linux).
START_METHOD_ENV = "STUDY_START_METHOD"

_LOCK = threading.Lock()
_SPAWNER: ThreadPoolExecutor | None = None
_CONTEXT: Any = None


def start_method() -> str:
    """``forkserver`` on Linux, else ``spawn``; ``STUDY_START_METHOD`` overrides it."""
    chosen = os.environ.get(START_METHOD_ENV, "").strip()
    if chosen in ("forkserver", "spawn"):
        return chosen
    return "forkserver" if sys.platform.startswith("linux") else "spawn"


def context() -> Any:
    """The `multiprocessing` context workers and their pipes come from (chosen once)."""
    global _CONTEXT
    with _LOCK:
        if _CONTEXT is None:
            method = start_method()
            _CONTEXT = mp.get_context(method)
            if method == "forkserver":
                _CONTEXT.set_forkserver_preload([PRELOAD])
        return _CONTEXT


def process(target: Callable[..., Any], args: tuple[Any, ...], name: str) -> Any:
    """A daemon worker process of `context` that runs ``target(*args)`` in this process'
    current environment, working directory and standard streams (not started yet: `start`)."""
    ctx = context()
    forked = ctx.get_start_method() == "forkserver"
    inherited = _Inherited(dict(os.environ), _Streams() if forked else None)
    return ctx.Process(target=_run, args=(inherited, target, args), daemon=True, name=name)


def start(process: Any) -> None:
    """``process.start()`` (a `multiprocessing` process) on the process-wide spawner thread;
    its exception, if any, is raised here."""
    start_soon(process).result()


def start_soon(process: Any) -> Future[None]:
    """``process.start()`` on the spawner thread, without waiting for it: its future."""
    return _spawner().submit(process.start)


def warm() -> None:
    """Start the forkserver now, without waiting for it: it imports TensorFlow (`PRELOAD`, 2-5
    CPU-seconds) while the caller goes on importing and opening what a run needs, so the first
    worker forks from a ready server. A no-op process is started and reaped on the spawner
    thread (the server starts with the first process it is asked for); under ``spawn`` there is
    no server to warm and nothing is done."""
    if context().get_start_method() != "forkserver":
        return
    warm_up = context().Process(target=_noop, daemon=True, name="study-warm")
    _spawner().submit(_start_and_reap, warm_up)


def _spawner() -> ThreadPoolExecutor:
    """The process-wide spawner thread (started on first use)."""
    global _SPAWNER
    with _LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-spawner")
        return _SPAWNER


def _start_and_reap(process: Any) -> None:
    process.start()
    process.join()


def _noop() -> None:
    """What the warm-up process runs (nothing: starting it started the server)."""


class _Streams:
    """The caller's file descriptors 1 and 2, passed to a forked worker as it is started."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Only while a process is being started (pickled for the forkserver) can fds be passed.
        return (_Received, (reduction.DupFd(1), reduction.DupFd(2)))


class _Received:
    """Standard output and error as received by the worker (fds to `install` as 1 and 2)."""

    def __init__(self, out: Any, err: Any) -> None:
        self.fds = (out.detach(), err.detach())

    def install(self) -> None:
        for fd, target in zip(self.fds, (1, 2)):
            if fd != target:
                os.dup2(fd, target)
                os.close(fd)


class _Inherited:
    """What a worker takes from the process that started it: environment and streams."""

    def __init__(self, environ: dict[str, str], streams: Any) -> None:
        self.environ = environ
        self.streams = streams

    def install(self) -> None:
        if self.streams is not None:
            self.streams.install()
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the server ignores it, a worker need not


def _run(inherited: _Inherited, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    inherited.install()
    with own_tempdir():  # removed when the target returns (`study.runner.scratch`)
        target(*args)
