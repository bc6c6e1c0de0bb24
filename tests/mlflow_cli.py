"""``mlflow ARGS`` whose web server is forked off the CLI instead of started afresh.

``mlflow server`` checks its stores, then starts its web server (uvicorn) as a fresh
interpreter, which imports MLflow's server app again: 3-4 CPU-seconds for each of the tests'
servers. Run as ``python -m tests.mlflow_cli ARGS`` forked from the tests' zygote
(`tests.zygote`, which imported the app), this CLI forks uvicorn off itself with the
environment MLflow would have given it; everything else is MLflow's own CLI. The CLI only waits
for the server after that (forwarding SIGTERM and SIGINT), so the stores it opened are the
server's alone. `tests.services.MlflowServer` starts its servers so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import mlflow.server


class _Server:
    """The forked web server: what MLflow's CLI uses of the `subprocess.Popen` it expects."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except InterruptedError:  # a forwarded signal; Python retries, but to be plain
                continue
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


def _fork_uvicorn(
    cmd: Sequence[str], extra_env: Mapping[str, str] | None = None, **kwargs: Any
) -> _Server:
    """MLflow's ``_exec_cmd`` for its ``python -m uvicorn ...`` command, forked."""
    assert list(cmd[1:3]) == ["-m", "uvicorn"] and not kwargs.get("synchronous"), cmd
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.environ.update(extra_env or {})
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            import uvicorn.main

            uvicorn.main.main(list(cmd[3:]), prog_name="uvicorn")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)  # never the CLI's exit handlers
    return _Server(pid)


def main(argv: Sequence[str]) -> None:
    from mlflow.cli import cli

    mlflow.server._exec_cmd = _fork_uvicorn
    cli.main(list(argv), prog_name="mlflow")


if __name__ == "__main__":
    main(sys.argv[1:])
