"""`study ui`: the MLflow server it starts (quiet, loopback, telemetry off), one-line errors
with exit status 2 for a bad or busy port and 1 for a server that cannot start, the runs-view
links it prints, the telemetry notice its app keeps away, and no server left after SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from study.commands.ui import command, server_env
from study.tracking.ui_app import NOTICE_DISMISSED, SCRIPT, NoticeDismissed, telemetry_off
from tests.browser import Browser, chromium, require_chromium
from tests.waiting import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def study_ui(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "study", "ui", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    return {**env, **extra}


# The server command


def test_command_runs_one_worker_on_loopback_with_store_artifacts(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cmd = command(uri, 5123)
    assert cmd[1:4] == ["-m", "mlflow", "server"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--port") + 1] == "5123"
    assert cmd[cmd.index("--workers") + 1] == "1"
    assert cmd[cmd.index("--backend-store-uri") + 1] == uri
    assert cmd[cmd.index("--default-artifact-root") + 1] == (tmp_path / "artifacts").as_uri()
    assert "--app-name" not in cmd
    assert command(uri, 5123, app_name="study")[-2:] == ["--app-name", "study"]


def test_server_env_turns_telemetry_and_the_job_runner_off(monkeypatch):
    for name in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "PYTHONWARNINGS"):
        monkeypatch.delenv(name, raising=False)
    env = server_env("sqlite:///x.db")

    assert env["MLFLOW_TRACKING_URI"] == "sqlite:///x.db"
    assert env["MLFLOW_DISABLE_TELEMETRY"] == env["DO_NOT_TRACK"] == "true"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert env["PYTHONWARNINGS"] == "ignore"
    assert telemetry_off(env)


# One-line errors


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_a_port_out_of_range_is_one_line_and_status_2(tmp_path, port):
    result = study_ui("--port", port, cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == f"study ui: error: --port must be between 1 and 65535 (got {port})\n"
    assert result.stdout == ""
    assert not (tmp_path / "mlruns").exists()


def test_a_busy_port_is_one_line_and_status_2(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = study_ui("--port", str(port), cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith(
        f"study ui: error: --port: port {port} on 127.0.0.1 is not free"
    )
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""


@pytest.mark.slow
def test_a_server_that_cannot_start_is_one_line_and_status_1(tmp_path):
    result = study_ui(
        "--port", str(_free_port()), "--tracking-uri", "bogus://nowhere", cwd=tmp_path
    )

    assert result.returncode == 1
    assert result.stderr.startswith("study ui: error: the MLflow server exited with status 1: ")
    assert result.stderr.count("\n") == 1
    log = Path(result.stderr.rsplit("(server log: ", 1)[1].rstrip(")\n"))
    assert "bogus://nowhere" in log.read_text()
    log.unlink()


# The app `study ui` serves


def asgi_get(wrap: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> tuple:
    """GET ``path`` from ``wrap(inner)``, where the ASGI app ``inner`` answers ``headers`` and
    ``body`` (in two chunks); return the status, headers and body that reach the client."""
    sent: list[dict[str, Any]] = []

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body[:10], "more_body": True})
        await send({"type": "http.response.body", "body": body[10:]})

    async def receive():
        return {"type": "http.request"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path}
    asyncio.run(wrap(inner)(scope, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


PAGE = b"<!doctype html><html><head><title>MLflow</title></head><body></body></html>"
HTML = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", b"%d" % len(PAGE))]


def test_the_page_dismisses_the_telemetry_notice_before_mlflows_scripts_run():
    status, headers, body = asgi_get(NoticeDismissed, "/", HTML, PAGE)

    assert status == 200
    assert body == PAGE.replace(b"<head>", b"<head>" + SCRIPT)
    assert NOTICE_DISMISSED.encode() in body
    assert headers[b"content-length"] == str(len(body)).encode()


def test_everything_else_passes_unchanged():
    js = [(b"content-type", b"application/javascript")]
    assert asgi_get(NoticeDismissed, "/", js, PAGE)[2] == PAGE
    assert asgi_get(NoticeDismissed, "/static-files/x.html", HTML, PAGE)[2] == PAGE
    gzipped = [*HTML, (b"content-encoding", b"gzip")]
    assert asgi_get(NoticeDismissed, "/", gzipped, PAGE)[2] == PAGE
    assert asgi_get(lambda inner: NoticeDismissed(inner, enabled=False), "/", HTML, PAGE)[2] == PAGE


def test_telemetry_off_follows_mlflows_variables():
    assert telemetry_off({"MLFLOW_DISABLE_TELEMETRY": "true"})
    assert telemetry_off({"DO_NOT_TRACK": "1"})
    assert not telemetry_off({"MLFLOW_DISABLE_TELEMETRY": "false"})
    assert not telemetry_off({})


# A running `study ui`


def register_app(directory: Path) -> Path:
    """A ``sys.path`` entry registering `study.tracking.ui_app` with ``mlflow server
    --app-name study``, as the package's entry point does once installed."""
    info = directory / "study_ui_app-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: study-ui-app\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[mlflow.app]\nstudy = study.tracking.ui_app:app\n")
    return directory


def wait_for_line(path: Path, text: str, process: subprocess.Popen[Any], timeout: float) -> str:
    """What ``study ui`` printed to ``path``, once it holds ``text``; the test fails at once if
    the process exits first, or after ``timeout`` seconds."""

    def printed() -> str:
        out = path.read_text() if path.exists() else ""
        if text in out:
            return out
        assert process.poll() is None, f"study ui exited with {process.returncode}: {out}"
        return ""

    return wait_until(printed, timeout, f"study ui printing {text!r}", poll=0.2)


def servers_on(port: int) -> dict[int, str]:
    """The processes still running an MLflow server on ``port``: command line by pid."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().split(b"\0")
            if b"mlflow" in b" ".join(args) and str(port).encode() in args:
                found[int(cmdline.parent.name)] = b" ".join(args).decode(errors="replace")
    return found


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_study_ui_serves_study_links_and_stops_its_server_on_sigterm(tmp_path):
    from study.tracking.mlflow_logger import MlflowLogger

    store = tmp_path / "mlruns"
    store.mkdir()
    experiment = MlflowLogger(f"sqlite:///{store / 'mlflow.db'}").experiment_id("quick")
    port = _free_port()
    out = tmp_path / "ui.out"
    env = _env(PYTHONPATH=os.pathsep.join([str(register_app(tmp_path / "plugin")), *sys.path]))
    with open(out, "w") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "study", "ui", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    try:
        lines = wait_for_line(out, "Ctrl-C to stop", process, timeout=150).splitlines()
        base = f"http://127.0.0.1:{port}"
        assert lines[0] == f"MLflow UI for sqlite:///{store / 'mlflow.db'}: starting on {base} ..."
        link = f"{base}/#/experiments/{experiment}/runs?workflowType=machine_learning"
        assert lines[1].split() == ["quick", link]
        with urllib.request.urlopen(f"{base}/", timeout=10) as response:
            assert SCRIPT in response.read()
        if chromium() is not None or os.environ.get("CI"):
            require_chromium()
            with Browser() as browser:  # MLflow's home page, where the notice would be
                browser.open(f"{base}/")
                browser.wait_for("document.body.innerText.includes('Welcome to MLflow')")
                # MLflow shows the notice unless this flag is set when its page starts; the
                # page's first script sets it, so it is set by now and the notice never comes.
                flag = browser.evaluate(f"localStorage.getItem({NOTICE_DISMISSED!r})")
                assert flag == "true"
                assert "usage data" not in browser.text()

        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(timeout=40) == 0
        assert process.stderr is not None and process.stderr.read() == ""
        assert not listening(port)
        assert servers_on(port) == {}
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in servers_on(port):  # what a failed test leaves behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
