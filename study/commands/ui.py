"""`study ui`: the MLflow UI on the study store, bound to 127.0.0.1.

The port is checked first (1 to 65535, free on 127.0.0.1; otherwise one line and exit status 2).
``mlflow server`` then runs as a child in its own process group: one worker, no job runner,
telemetry off, warnings silenced, and its log in a temporary file rather than on the terminal.
Once it answers, the runs-view link of each study in the store is printed. SIGTERM, SIGINT
(Ctrl-C) and SIGHUP stop the whole group and wait for it, so no server outlives ``study ui``.
A server that does not start (or dies) gives one line from its log and exit status 1.

On a tracking server (``--tracking-uri http://...``) there is nothing to start: the links to its
studies are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from study.errors import ExitCode, UsageError
from study.paths import artifact_root, masked, tracking_uri
from study.tracking.server import (
    EXPERIMENT_KIND,
    MODEL_TRAINING,
    check_answers,
    experiment_links,
    experiments_url,
    is_http,
)
from study.tracking.ui_app import APP_NAME

HOST = "127.0.0.1"
#: How long the server may take to answer (a new store is created and migrated first).
START_SECONDS = 180.0
#: How long a stopping server may take before its group is killed.
STOP_SECONDS = 20.0
#: At most this many studies get a link.
MAX_LINKS = 20
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def command(uri: str, port: int, host: str = HOST, *, app_name: str | None = None) -> list[str]:
    """The ``mlflow server`` command line for a tracking store."""
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    artifacts = artifact_root(uri)
    if artifacts:
        cmd += ["--default-artifact-root", artifacts]
    if app_name:
        cmd += ["--app-name", app_name]
    return cmd


def server_env(uri: str) -> dict[str, str]:
    """The server's environment: this one, with telemetry and MLflow's job runner off and
    Python's warnings silenced (a variable already set is kept)."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    for name, value in {
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "PYTHONWARNINGS": "ignore",
    }.items():
        env.setdefault(name, value)
    return env


def check_port(port: int, host: str = HOST) -> None:
    """Raise `UsageError` unless ``port`` is a port number nothing listens on at ``host``."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535 (got {port})")
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UsageError(
                f"--port: port {port} on {host} is not free ({exc.strerror}); "
                f"choose another, e.g. --port {_free_port(host)}"
            ) from None


def app_name() -> str | None:
    """``study`` when the package registers its server app (`study.tracking.ui_app`) with
    MLflow, else None (MLflow's own app; its home page then shows the telemetry notice)."""
    entry_points = importlib.metadata.entry_points(group="mlflow.app")
    return APP_NAME if any(e.name == APP_NAME for e in entry_points) else None


def main(args: argparse.Namespace) -> int:
    given = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if given and is_http(given):
        check_answers(given, "--tracking-uri" if args.tracking_uri else "MLFLOW_TRACKING_URI")
        print(f"MLflow UI of the tracking server {masked(given)}:")
        _print_links(given)
        return ExitCode.OK
    check_port(args.port)
    uri = tracking_uri(args.tracking_uri)  # creates the local store's folder: checks first
    base = f"http://{HOST}:{args.port}"
    print(f"MLflow UI for {masked(uri)}: starting on {base} ...", flush=True)
    log = Path(tempfile.mkstemp(prefix=f"study-ui-{args.port}-", suffix=".log")[1])
    server = _Server(command(uri, args.port, app_name=app_name()), server_env(uri), log)
    with _stop_on_signals(server.stop), server:
        status = server.serve(base, on_ready=lambda: _on_ready(base))
    if server.stopped:
        log.unlink(missing_ok=True)
        return ExitCode.OK
    print(f"study ui: error: {server.failure(status)} (server log: {log})", file=sys.stderr)
    return ExitCode.FAILED


def _on_ready(base: str) -> None:
    _print_links(base)
    print("Ctrl-C to stop", flush=True)


def _print_links(base: str) -> None:
    """Print the runs-view link of each study (experiment marked as model training), newest
    first, and the link to all experiments."""
    for line in experiment_links(masked(base), _studies(base)):
        print(f"  {line}")
    print(f"  all experiments: {experiments_url(masked(base))}", flush=True)


def _studies(base: str) -> list[dict[str, Any]]:
    """The server's model-training experiments, most recently updated first (none if it will
    not say, e.g. without credentials)."""
    query = urllib.parse.urlencode(
        {
            "max_results": MAX_LINKS,
            "order_by": "last_update_time DESC",
            "filter": f"tags.`{EXPERIMENT_KIND}` = '{MODEL_TRAINING}'",
        }
    )
    url = f"{base.rstrip('/')}/api/2.0/mlflow/experiments/search?{query}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return list(json.load(response).get("experiments", []))
    except (OSError, ValueError):
        return []


class _Server:
    """``mlflow server`` in its own process group (started on entering), output to ``log``."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.cmd, self.env, self.log = cmd, env, log
        self.stopped = False
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Server:
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                self.cmd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self.stopped:  # a signal came while it started
            self.stop()
        return self

    def __exit__(self, *_: object) -> None:
        self._end_group()

    def serve(self, base: str, on_ready: Callable[[], None]) -> int:
        """Wait until the server answers (then call ``on_ready``) and until it exits; return
        its exit status (-1 if it did not answer within `START_SECONDS`)."""
        process = self._started()
        deadline = time.monotonic() + START_SECONDS
        while not self.stopped and process.poll() is None:
            if _answers(f"{base}/health"):
                on_ready()
                return process.wait()
            if time.monotonic() > deadline:
                return -1
            time.sleep(0.25)
        return process.wait()

    def stop(self) -> None:
        """Ask the whole group to stop (the signal handlers call this)."""
        self.stopped = True
        if self.process is not None:
            _signal_group(self.process.pid, signal.SIGTERM)

    def failure(self, status: int) -> str:
        """One line on why the server is not serving."""
        if status == -1:
            what = f"the MLflow server did not answer within {START_SECONDS:.0f} s"
        else:
            what = f"the MLflow server exited with status {status}"
        last = _last_line(self.log)
        return f"{what}: {last}" if last else what

    def _started(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise RuntimeError("the server is started by entering it (`with server:`)")
        return self.process

    def _end_group(self) -> None:
        """SIGTERM the group, wait for it, SIGKILL what is left after `STOP_SECONDS`."""
        process = self._started()
        _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_SECONDS)
        while _group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """While inside, SIGTERM, SIGINT (Ctrl-C) and SIGHUP call ``stop`` instead of ending us."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    previous = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _last_line(log: Path) -> str:
    """The last non-blank line of the server's log, trimmed to one screen line."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return last if len(last) <= 240 else last[:237] + "..."


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
