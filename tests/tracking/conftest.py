"""A real MLflow tracking server for the tracking tests, reached through its REST API.

``STUDY_TEST_MLFLOW_URI`` names one already running (CI starts one); otherwise the session
starts ``mlflow server`` on a free port with a SQLite store and proxied artifacts under a
temporary directory, waits until it answers, and stops its whole process group at the end.
Nothing is skipped: a server that does not come up fails the tests that need it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

START_SECONDS = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not answers(f"{url}/health"):
        if process.poll() is not None:
            pytest.fail(f"mlflow server exited with {process.returncode}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(
                f"mlflow server did not answer in {START_SECONDS:.0f} s:\n{log.read_text()}"
            )
        time.sleep(0.25)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM a process started in its own session and its children; SIGKILL after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URI of a running MLflow tracking server."""
    given = os.environ.get("STUDY_TEST_MLFLOW_URI")
    if given:
        yield given.rstrip("/")
        return
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    log = root / "server.log"
    env = dict(
        os.environ,
        MLFLOW_DISABLE_TELEMETRY="true",
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
        PYTHONWARNINGS="ignore",
    )
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
                "--backend-store-uri",
                f"sqlite:///{root / 'mlflow.db'}",
                "--artifacts-destination",
                str(root / "artifacts"),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process, log)
        yield url
    finally:
        stop_group(process)
