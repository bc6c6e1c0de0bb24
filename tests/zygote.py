"""`study` processes forked from one warm Python (a zygote) instead of started afresh.

The tests that kill, signal and race study hosts need each host to be a process of its own,
and most of such a host's CPU went to its fresh interpreter's imports (MLflow, Optuna,
SQLAlchemy, Alembic, SciPy and this package: 3-4 CPU-seconds each, `benchmarks/host_cost.py`).
The zygote imports them once per test process; `spawn` forks a host from it that runs as
``python -m study ARGS`` would: in a session (process group) of its own, in its own directory
and environment, with its own module path (the directory first, then ``PYTHONPATH``), standard
streams and default signal dispositions; ``study.__main__`` runs as ``__main__`` and the
interpreter ends as usual (atexit handlers, non-daemon threads joined). The zygote imports
TensorFlow too, without starting its runtime (it checks), as a script that defines its model
with TensorFlow has: a `study` host forks its trainer workers' server off itself as it starts
instead of starting one that imports TensorFlow again (`tests.fork_server`; 4-5 CPU-seconds a
host).
What the zygote holds as it forks is frozen (`gc.freeze`): a host's garbage collector never
traverses it, nor does its exit (a host that only exits: 0.3 CPU-seconds instead of 2.0,
`benchmarks/host_exit.py`).
The zygote also makes the empty MLflow store that a host's new local store
is copied from (`study.tracking.store_template`, in a cache folder of its own), as a host that
had made a store before would have.

The zygote is a child of the test process; hosts are its children, so the zygote reaps them
and reports each exit status, and `Forked` gives a test what it used from `subprocess.Popen`
(``pid``, ``poll``, ``wait``, ``returncode``, ``send_signal``, ``kill``).

Run as ``python -m tests.zygote REQUESTS_FD REPLIES_FD`` by `Zygote`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: What the zygote imports before it forks anything: every command, the host's engine, tuners,
#: tracking and report, and what they import lazily (MLflow's and Optuna's stores, Alembic).
PRELOAD = (
    "study.cli",
    "study.ext.branch.command",
    "study.ext.batch_science.command",
    "study.commands.check_workload",
    "study.commands.noise_scale",
    "study.commands.probe",
    "study.commands.records",
    "study.commands.report",
    "study.commands.run",
    "study.ext.schedules.command",
    "study.ext.storage_proxy.command",
    "study.commands.studies",
    "study.commands.train",
    "study.commands.ui",
    "study.commands.worker",
    "study.runner.launch",
    "study.runner.worker",
    "study.runner.oracle_process",
    "study.tuners.optuna_backend",
    "study.tuners.keras_tuner_backend",
    "study.report",
    "study.report.stored",
    "study.analysis.load",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.store.model_registry.sqlalchemy_store",
    "alembic.runtime.migration",
    "optuna.storages.journal",
    "multiprocessing.forkserver",
    "multiprocessing.popen_forkserver",
    "multiprocessing.resource_tracker",
    # The tests' ``mlflow server`` (`tests.services.MlflowServer`): its CLI and what it imports
    # to create the stores before it starts the web server.
    "mlflow.cli",
    "mlflow.server",
    "mlflow.server.handlers",
    # ... and the web server it forks (`tests.mlflow_cli`): MLflow's app, uvicorn's parts.
    "mlflow.server.fastapi_app",
    "uvicorn.main",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
)
#: The repository root: the zygote runs as ``-m tests.zygote`` from here.
ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------
# The test process' side


class Forked:
    """A host forked by the zygote: what the tests use of `subprocess.Popen`."""

    def __init__(self, zygote: Zygote, pid: int, args: Sequence[str]) -> None:
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None
        self._zygote = zygote

    def poll(self) -> int | None:
        """Its exit status (negative: the signal that ended it), None while it runs."""
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for its end and return its exit status; `subprocess.TimeoutExpired` if it
        still runs after ``timeout`` seconds."""
        with self._zygote.ended:
            if not self._zygote.ended.wait_for(lambda: self.returncode is not None, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The zygote process and the thread that reads its replies (pids and exit statuses)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        requests_read, self._requests = os.pipe()
        #: The zygote's own cache (the MLflow store template); each host names its own.
        self.cache = Path(tempfile.mkdtemp(prefix="study-zygote-cache-"))
        self._replies, replies_write = os.pipe()
        #: What the zygote itself writes (an import that fails), quoted if it ends.
        self.log = Path(tempfile.mkstemp(prefix="study-zygote-", suffix=".log")[1])
        with open(self.log, "wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.zygote", str(requests_read), str(replies_write)],
                cwd=ROOT,
                env={**env, "STUDY_CACHE_DIR": str(self.cache)},
                pass_fds=(requests_read, replies_write),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        os.close(requests_read)
        os.close(replies_write)
        self.ended = threading.Condition()
        self._lock = threading.Lock()
        self._next = 0
        self._spawned: dict[int, int] = {}  # request id -> pid
        self._running: dict[int, Forked] = {}  # pid -> host
        self._failure = ""
        threading.Thread(target=self._read, name="zygote-replies", daemon=True).start()

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdout: Path,
        stderr: Path,
        timeout: float = 120,
        module: str = "study",
        fork_server: bool | None = None,
    ) -> Forked:
        """Fork ``python -m study ARGV`` in ``cwd`` with environment ``env``, its standard
        output and error written to the files ``stdout`` and ``stderr`` (``module``: run
        ``python -m MODULE ARGV`` instead, or ``python MODULE ARGV`` if it names a .py file).
        The host forks its trainer workers' server off itself as it starts if ``fork_server``
        (by default: when it runs `study`'s command line; `tests.fork_server`)."""
        for path in (stdout, stderr):  # there as the call returns, as `subprocess.Popen`'s
            path.write_bytes(b"")
        request = {
            "argv": [str(a) for a in argv],
            "cwd": str(cwd),
            "env": dict(env),
            "stdout": str(stdout),
            "stderr": str(stderr),
            "module": module,
            "fork_server": module == "study" if fork_server is None else fork_server,
        }
        with self._lock:
            self._next += 1
            request["id"] = ident = self._next
            os.write(self._requests, (json.dumps(request) + "\n").encode())
        with self.ended:
            if not self.ended.wait_for(lambda: ident in self._spawned or self._failure, timeout):
                raise RuntimeError(f"the zygote did not fork `study {' '.join(argv)}`")
            if self._failure:
                raise RuntimeError(self._failure)
            return self._running[self._spawned.pop(ident)]

    def _read(self) -> None:
        with os.fdopen(self._replies, "rb") as replies:
            for line in replies:
                reply = json.loads(line)
                with self.ended:
                    if "exit" in reply:
                        host = self._running.pop(reply["exit"], None)
                        if host is not None:
                            host.returncode = reply["code"]
                    else:
                        pid = reply["pid"]
                        self._running[pid] = Forked(self, pid, ["study", *reply["argv"]])
                        self._spawned[reply["id"]] = pid
                    self.ended.notify_all()
        status = self._process.wait()
        said = self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
        with self.ended:
            self._failure = f"the zygote ended (exit status {status}): {said}"
            self.ended.notify_all()

    def close(self) -> None:
        """End the zygote (its running hosts go on; the tests stop their own)."""
        with contextlib.suppress(OSError):
            os.close(self._requests)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(10)
        self.log.unlink(missing_ok=True)
        shutil.rmtree(self.cache, ignore_errors=True)


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def zygote() -> Zygote:
    """This test process' zygote, started on first use in this process' environment without
    store locations (each host gets its own environment)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None:
            drop = ("MLFLOW_TRACKING_URI", "STUDY_HOME", "STUDY_CACHE_DIR")
            env = {k: v for k, v in os.environ.items() if k not in drop}
            _ZYGOTE = Zygote(env | {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"})
            atexit.register(_ZYGOTE.close)
        return _ZYGOTE


def run(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -m study ARGV`` forked from this test process' zygote in ``cwd`` with
    environment ``env`` (also the zygote's, if this starts it): its exit status, standard
    output and error once it ends (killed with its group after ``timeout`` seconds, and
    `subprocess.TimeoutExpired` raised)."""
    with tempfile.TemporaryDirectory(prefix="study-run-") as logs:
        out, err = Path(logs) / "out", Path(logs) / "err"
        process = zygote().spawn(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        try:
            status = process.wait(timeout)
        finally:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        read = {"encoding": "utf-8", "errors": "replace"}
        return subprocess.CompletedProcess(
            ["study", *argv], status, out.read_text(**read), err.read_text(**read)
        )


# --------------------------------------------------------------------------------------------
# The zygote's side


def serve(requests: int, replies: int) -> None:
    """Import `PRELOAD`, then fork a host per request line until the requests pipe closes,
    writing each host's pid and, once reaped, its exit status to ``replies``."""
    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    from study.deps import quiet_stderr, without_keras_extras
    from study.tracking.store_template import template_path
    from tests.fork_server import fork_server, tensorflow_idle

    with quiet_stderr(), without_keras_extras():
        import tensorflow  # noqa: F401

    template_path()  # made once here, copied by every host that makes a local store

    # A fresh process sets these as it imports them (`study.tracking` MLflow's defaults,
    # TensorFlow its own); a host's environment is replaced after the imports, so `_become`
    # sets them again where the request's environment does not.
    _IMPORTS_SET.update((k, v) for k, v in os.environ.items() if before.get(k) != v)
    assert threading.active_count() == 1, "the zygote must not start threads before it forks"
    assert tensorflow_idle(), "the zygote must import TensorFlow without starting its runtime"
    gc.collect()
    gc.freeze()  # never traversed again by a host's collections, nor at its exit
    pending = b""
    while True:
        ready, _, _ = select.select([requests], [], [], 0.02)
        if ready:
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                sys.stdout.flush(), sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(requests), os.close(replies)
                    _become(request)
                    if request.get("fork_server"):
                        fork_server()
                    raise SystemExit(_run_module(request["module"]))
                _reply(replies, {"id": request["id"], "pid": pid, "argv": request["argv"]})
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _reply(replies, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _reply(replies: int, reply: dict[str, Any]) -> None:
    os.write(replies, (json.dumps(reply) + "\n").encode())


#: What the zygote's imports set in its environment (`serve`), set again in each host's.
_IMPORTS_SET: dict[str, str] = {}
#: The zygote's own ``PYTHONPATH`` entries: a host's module path has the request's instead.
_OWN_PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _become(request: dict[str, Any]) -> None:
    """In the forked child: what ``python -m study`` started by `subprocess.Popen` (own
    session, default signals) in the request's directory and environment would have."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    import multiprocessing.process

    multiprocessing.process.ORIGINAL_DIR = os.getcwd()  # set as a fresh process imports it
    os.environ.clear()
    os.environ.update(request["env"])
    from study.tracking import set_mlflow_defaults

    set_mlflow_defaults()
    for name, value in _IMPORTS_SET.items():
        os.environ.setdefault(name, value)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base = [p for p in sys.path[1:] if p not in extra and p not in _OWN_PYTHONPATH]
    sys.path[:] = [os.getcwd(), *extra, *base]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    tempfile.tempdir = None  # found again from this environment's TMPDIR, as a fresh process does
    sys.argv = [request["module"], *request["argv"]]


def _run_module(module: str) -> int:
    """``python -m MODULE``: run it (a package: its ``__main__``) as the main module, or
    ``python MODULE`` for a .py file; its exit status."""
    import runpy

    try:
        if module.endswith(".py"):
            sys.path[0] = os.path.dirname(os.path.abspath(module))  # as `python FILE` has it
            runpy.run_path(module, run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        raise
    return 0


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
