import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from study.commands.ui import command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_command_binds_loopback_and_uses_store_artifacts(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cmd = command(uri, 5123)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--backend-store-uri") + 1] == uri
    assert cmd[cmd.index("--default-artifact-root") + 1] == (tmp_path / "artifacts").as_uri()


@pytest.mark.slow
def test_study_ui_serves_the_store(tmp_path):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "study", "ui", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        first = proc.stdout.readline()
        url = proc.stdout.readline().split()[0]
        assert "sqlite:///" in first and "mlruns/mlflow.db" in first
        assert url == f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert proc.poll() is None, "mlflow ui exited"
                assert time.time() < deadline, "mlflow ui did not answer in 90 s"
                time.sleep(0.5)
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
