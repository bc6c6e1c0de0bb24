"""Tests for tests.zygote: a `study` process forked from the warm zygote behaves as
``python -m study`` started afresh (exit status, output, directory, environment)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from study.version import __version__
from tests.waiting import wait_until
from tests.zygote import run, zygote


def fresh(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "study", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_forked_command_answers_as_a_fresh_one(tmp_path: Path) -> None:
    env = dict(os.environ)
    for args in (["--version"], ["status", "no-such-study"], ["run", "missing.yaml"]):
        forked = run(args, cwd=tmp_path, env=env, timeout=120)
        started = fresh(*args, cwd=tmp_path, env=env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            started.returncode,
            started.stdout,
            started.stderr,
        ), args
    assert run(["--version"], cwd=tmp_path, env=env, timeout=120).stdout.split() == [
        "study",
        __version__,
    ]


PROBE = """
import json, os, signal, sys
json.dump({
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "path": sys.path[:3],
    "session": os.getsid(0) == os.getpid(),
    "retries": os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES"),
    "telemetry": os.environ.get("MLFLOW_DISABLE_TELEMETRY"),
    "mine": os.environ.get("MINE"),
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "sigterm": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
    "stdin": sys.stdin.read(),
}, sys.stdout)
sys.exit(int(sys.argv[1]))
"""


def test_a_forked_process_has_its_own_session_directory_path_and_environment(
    tmp_path: Path,
) -> None:
    """A module in its directory is found first, then those on its ``PYTHONPATH``; what
    `study.tracking` sets in the environment as it is imported is set there too, unless the
    process' own environment says otherwise; its exit status is the module's."""
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    extra = tmp_path / "extra"
    extra.mkdir()
    out, err = tmp_path / "out", tmp_path / "err"
    env = {"PATH": os.environ["PATH"], "MINE": "1", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5"}
    env["PYTHONPATH"] = str(extra)
    process = zygote().spawn(
        ["3", "x"], cwd=tmp_path, env=env, stdout=out, stderr=err, module="probe"
    )
    assert out.exists() and err.exists()  # there as soon as it is started, as with Popen
    assert process.wait(60) == 3, err.read_text()
    assert process.poll() == 3
    seen = json.loads(out.read_text())
    assert seen == {
        "argv": ["3", "x"],
        "cwd": str(tmp_path),
        "path": [str(tmp_path), str(extra), seen["path"][2]],
        "session": True,
        "retries": "5",
        "telemetry": "true",
        "mine": "1",
        "sigint": True,
        "sigterm": True,
        "stdin": "",
    }
    assert str(extra) not in seen["path"][2]


def test_a_killed_process_reports_the_signal(tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text("import signal\nprint('up', flush=True)\nsignal.pause()\n")
    out, err = tmp_path / "out", tmp_path / "err"
    process = zygote().spawn(
        [], cwd=tmp_path, env=dict(os.environ), stdout=out, stderr=err, module="sleeper"
    )
    wait_until(lambda: out.read_text() == "up\n", 60, "the sleeper to start")
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL
