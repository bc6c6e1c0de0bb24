"""The tests' hosts fork their trainer workers' server off themselves (CPython internals).

A host forked from the zygote (`tests.zygote`) has imported TensorFlow without starting its
runtime and runs one thread; a forkserver that `multiprocessing` starts afresh would import
TensorFlow again (4-5 CPU-seconds a host). So the zygote forks each CLI host's server off the
host itself as the host starts (`fork_server`): it is ready at once. Only the test harness
gains: a `study` command-line process has not imported TensorFlow when its command starts, so
it never could fork its server this way (measured: `study run --example quickstart` never did),
and `study` keeps to `multiprocessing`'s public API.

This writes `multiprocessing.forkserver`'s private state (``_forkserver``, its
``_forkserver_pid``, ``_forkserver_address``, ``_forkserver_alive_fd``, ``_lock`` and
``_preload_modules``; ``resource_tracker._resource_tracker``'s ``_fd`` and ``_pid``), as
CPython 3.10-3.13 name it; `tests.test_fork_server` fails first when they move. The forked
server keeps only what a started one is given (standard streams, its socket and pipe; every
other descriptor is closed, the inherited objects frozen so that they are never collected, the
main module emptied), so its workers are those a started server would fork.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import sys
import threading
import traceback
import types
from multiprocessing import connection, forkserver, resource_tracker, util
from typing import Any, NoReturn

from study.runner import spawning


def fork_server() -> bool:
    """Fork the forkserver off this process now if it is `forkable` and workers are forked
    (`study.runner.spawning.context`); whether a server runs."""
    if spawning.context().get_start_method() != "forkserver":
        return False
    server = forkserver._forkserver
    if server._forkserver_pid is None and forkable():
        _fork_server(server)
    return server._forkserver_pid is not None


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
    """Whether TensorFlow is imported here and its runtime (and its threads) not started:
    ``tensorflow.python.eager.context._context`` is None or not ``_initialized``."""
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
