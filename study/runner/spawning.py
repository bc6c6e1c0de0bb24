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

**Forked when that is free.** `study`'s own command-line process, when it has imported
TensorFlow already without starting its runtime and runs one thread in all, forks the server
off itself as its command starts (`fork_server`): it is ready at once, without importing
TensorFlow a second time. In practice that is a process forked from a warm one that imported
TensorFlow (the tests' hosts; 4-5 CPU-seconds each): a fresh interpreter runs library threads
(OpenBLAS's, jemalloc's) by the time it has imported what a host imports. The forked server
keeps only what a started one is given (standard streams, its socket and pipe; every other
descriptor is closed, the inherited objects frozen so that they are never collected, the main
module emptied), so its workers are those a started server would fork. Another process (a
notebook, a test runner) holds state of its own, and starts the server afresh unless it asks
for a fork (``fork_server(anywhere=True)``).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import traceback
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import connection, forkserver, reduction, resource_tracker, util
from typing import Any, NoReturn

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


def fork_server(anywhere: bool = False) -> bool:
    """Fork the forkserver off this process now if it is `forkable` and `study`'s command line
    (or ``anywhere``: a process whose state, whatever it holds, its workers may inherit);
    whether a server runs. `study`'s commands that train call this before anything else;
    otherwise the server starts afresh with the first worker, as `multiprocessing` starts it."""
    if context().get_start_method() != "forkserver":
        return False
    server = forkserver._forkserver
    if server._forkserver_pid is None and (anywhere or command_line()) and forkable():
        _fork_server(server)
    return server._forkserver_pid is not None


def command_line() -> bool:
    """Whether this process is `study`'s command line: ``python -m study``, or the ``study``
    script (a main module that runs ``study.cli.main``)."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == "study.__main__":
        return True
    cli = sys.modules.get("study.cli")
    return cli is not None and getattr(main, "main", None) is getattr(cli, "main", None)


def forkable() -> bool:
    """Whether this process can fork the forkserver off itself: `tensorflow_idle`, and one
    thread in all (a fork copies only the calling thread, and whatever locks the others held;
    a library's own threads, gRPC's say, count too)."""
    if threading.active_count() != 1 or not tensorflow_idle():
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:  # no /proc to ask: start the server afresh
        return False


def tensorflow_idle() -> bool:
    """Whether TensorFlow is imported here and its runtime (and its threads) not started."""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context as tf_context

        runtime = tf_context._context
        return runtime is None or not runtime._initialized
    except Exception:  # a TensorFlow whose internals moved: say it runs
        return False


def _fork_server(server: Any) -> None:
    """`multiprocessing.forkserver.ForkServer.ensure_running`, with the server forked off this
    process instead of started as a fresh interpreter."""
    with server._lock:
        resource_tracker.ensure_running()
        if server._forkserver_pid is not None:
            return
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")
            listener.bind(address)
            if not util.is_abstract_socket_namespace(address):
                os.chmod(address, 0o600)
            listener.listen()
            alive_r, alive_w = os.pipe()  # the server ends once every client closed alive_w
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _serve(server, listener.fileno(), alive_r)
            os.close(alive_r)
        server._forkserver_address = address
        server._forkserver_alive_fd = alive_w
        server._forkserver_pid = pid


def _serve(server: Any, listener: int, alive_r: int) -> NoReturn:
    """In the forked child: become the server a fresh interpreter would have been."""
    code = 1
    try:
        gc.freeze()  # objects whose descriptors close below are never collected (nor closed)
        keep = {0, 1, 2, listener, alive_r}
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        # A fresh server's main module is empty: a worker imports the caller's main script
        # anew (as ``__mp_main__``), as one forked by a started server does.
        sys.modules["__main__"] = types.ModuleType("__main__")
        # What this process held as a client of a server, the server itself has not.
        server._lock = threading.Lock()
        server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
        resource_tracker._resource_tracker._fd = resource_tracker._resource_tracker._pid = None
        forkserver.main(listener, alive_r, server._preload_modules)
    except SystemExit:  # how the server's loop ends once its clients are gone
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)  # never this process' exit handlers, which belong to the caller


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
    global _SPAWNER
    with _LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-spawner")
        spawner = _SPAWNER
    spawner.submit(process.start).result()


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
