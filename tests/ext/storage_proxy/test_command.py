"""`study serve-storage` as a user runs it, in front of a real PostgreSQL server: one line
with the address it serves, other commands reach the database through it, SIGTERM and Ctrl-C
stop it with exit 0; bad input is one line and exit 2."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import study
from tests.services import PG_PASSWORD, free_port

pytestmark = pytest.mark.slow


def serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "study", "serve-storage", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def address_of(process: subprocess.Popen[str]) -> str:
    """The address the proxy prints in its one line."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("study serve-storage: serving postgresql+psycopg://study:***@"), line
    return line.split(" at ", 1)[1].split()[0]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_the_database_and_stops_cleanly(
    postgres_url: str, tmp_path: Path, stop: signal.Signals
) -> None:
    proxy = serve("--storage", postgres_url, "--port", "0", cwd=tmp_path)
    try:
        address = address_of(proxy)
        assert address.startswith("grpc://127.0.0.1:")
        listed = study("ls", "--storage", address, cwd=tmp_path)
        assert (listed.returncode, listed.stderr) == (0, "")
        assert listed.stdout.startswith("no studies yet")
        proxy.send_signal(stop)
        out, err = proxy.communicate(timeout=30)
    finally:
        proxy.kill()
    assert (proxy.returncode, out, err) == (0, "", "")
    gone = study("ls", "--storage", address, "--storage-retry", "0", cwd=tmp_path)
    assert gone.returncode == 2
    assert gone.stderr.startswith(f"study ls: error: --storage: cannot open {address!r}: ")


def test_a_database_that_cannot_be_opened_is_one_line(postgres_url: str, tmp_path: Path) -> None:
    wrong = postgres_url.replace(PG_PASSWORD, "Wr0ngPassw0rd")
    result = study("serve-storage", "--storage", wrong, "--port", "0", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("study serve-storage: error: --storage: cannot open ")
    assert "password authentication failed" in result.stderr
    assert result.stderr.count("\n") == 1 and "Wr0ngPassw0rd" not in result.stderr


@pytest.mark.parametrize(
    "storage",
    ["mlruns/optuna.journal", "sqlite:///ledger.db", "grpc://127.0.0.1:13000"],
)
def test_only_a_database_server_can_be_served(storage: str, tmp_path: Path) -> None:
    result = study("serve-storage", "--storage", storage, "--port", "0", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "study serve-storage: error: --storage must be a database server's URL "
        f"(postgresql://..., mysql://...) (got {storage!r})\n"
    )
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "ledger.db").exists()


def test_a_port_in_use_is_one_line(postgres_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = study(
            "serve-storage", "--storage", postgres_url, "--port", str(port), cwd=tmp_path
        )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"study serve-storage: error: --port: cannot listen on 127.0.0.1:{port} "
        "(in use, or not this host's address)\n"
    )


@pytest.mark.parametrize(("flag", "value"), [("--port", "70000"), ("--threads", "0")])
def test_a_bad_number_is_one_line(flag: str, value: str, tmp_path: Path) -> None:
    args = ["--storage", "postgresql://u:p@127.0.0.1:1/db", "--port", str(free_port())]
    result = study("serve-storage", *args, flag, value, cwd=tmp_path)  # the last --port wins
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"study serve-storage: error: {flag} must be ")
    assert result.stderr.count("\n") == 1
