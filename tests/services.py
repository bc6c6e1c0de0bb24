"""Real services for the tests: a PostgreSQL server and an ``mlflow server``, each started on a
free loopback port in a temporary directory and stopped (with every child process) at the end.

* `postgresql_server` runs Debian's PostgreSQL (``/usr/lib/postgresql/<version>/bin``, or the
  ``initdb`` on ``PATH``). PostgreSQL refuses to run as root, so as root the server runs as the
  ``postgres`` system user (``runuser -u postgres --``) in a directory it owns. It yields a
  `PostgresServer` whose `PostgresServer.create_database` makes a fresh database owned by a
  login role with a password, e.g. ``postgresql+psycopg://study:<pw>@127.0.0.1:PORT/db1``.
* `mlflow_server` runs ``mlflow server`` with a SQLite or PostgreSQL backend store and proxied
  artifacts (``--serve-artifacts``, the default of ``mlflow server``) under a root directory;
  `mlflow_process` yields its `MlflowServer`, which a test can kill and start again on the same
  port and store.

Missing binaries skip a test on a developer's machine, but fail it under ``CI=1`` (CI installs
them; `.ci/run`). A server that does not come up fails the test with its log.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from study.tracking.store_template import seed_new_store
from tests.waiting import wait_until
from tests.zygote import Forked, zygote

#: How long a server may take to answer, in seconds (MLflow migrates its store on first start).
START_SECONDS = 180.0
#: The login role and password of every database `PostgresServer.create_database` makes.
PG_USER = "study"
PG_PASSWORD = "s3cret-" + secrets.token_hex(4)
#: The superuser's password (host connections use passwords; no trust over TCP).
PG_SUPERUSER = "postgres"
_SUPER_PASSWORD = secrets.token_hex(12)
_databases = itertools.count(1)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing(what: str, fix: str) -> None:
    """Skip a test for a missing service binary, or fail it under ``CI=1``."""
    message = f"{what} is not installed ({fix})"
    if os.environ.get("CI"):
        pytest.fail(f"CI=1: {message}", pytrace=False)
    pytest.skip(message)


def stop_group(process: subprocess.Popen[bytes] | Forked, first: int = signal.SIGTERM) -> None:
    """Signal a process started in its own session and its children (``first``, then SIGKILL
    after 20 s) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait(
    ready: Callable[[], bool], process: subprocess.Popen[bytes] | Forked, log: Path, what: str
) -> None:
    """Poll ``ready`` (`wait_until`); fail with the server's log when it exits first or does not
    answer within `START_SECONDS`."""

    def answered() -> bool:
        if ready():
            return True
        if process.poll() is not None:
            pytest.fail(f"{what} exited with {process.returncode}:\n{log.read_text()}")
        return False

    wait_until(
        answered,
        START_SECONDS,
        f"an answer from {what}",
        0.2,
        detail=lambda: f"\n{log.read_text()}",
    )


# --------------------------------------------------------------------------------------------
# PostgreSQL


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server binaries (the newest Debian version), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _as_server_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def _chown_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, user="postgres", group="postgres")


class Postmaster:
    """The server process of a `PostgresServer`, which a test can stop and start again on the
    same port and data (an outage: `stop` ``immediate`` is a crash-like stop, ``fast`` a clean
    one)."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv, self.log = argv, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready: Callable[[], bool]) -> None:
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        _wait(ready, self.process, self.log, "postgres")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (SIGINT) or ``immediate`` (SIGQUIT, no checkpoint)."""
        if self.process is not None and self.process.poll() is None:
            stop_group(self.process, signal.SIGQUIT if mode == "immediate" else signal.SIGINT)
        self.process = None


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL server on 127.0.0.1 and the role tests connect as; ``postmaster``
    stops and starts it (tests of outages use a server of their own)."""

    port: int
    user: str = PG_USER
    password: str = PG_PASSWORD
    host: str = "127.0.0.1"
    postmaster: Postmaster | None = field(default=None, compare=False, repr=False)

    def restart_after(self, outage: Callable[[], None], mode: str = "immediate") -> None:
        """Stop the server (``mode``), call ``outage`` while it is down, start it again."""
        assert self.postmaster is not None
        self.postmaster.stop(mode)
        outage()
        self.postmaster.start(self.answers)

    def url(self, database: str, *, driver: str = "psycopg", password: str | None = None) -> str:
        """A SQLAlchemy URL of ``database``, e.g.
        ``postgresql+psycopg://study:pw@127.0.0.1:5433/db1`` (``driver=""``: ``postgresql://``)."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        secret = self.password if password is None else password
        return f"{scheme}://{self.user}:{secret}@{self.host}:{self.port}/{database}"

    def _super(self) -> object:
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=PG_SUPERUSER,
            password=_SUPER_PASSWORD,
            dbname="postgres",
            autocommit=True,
        )

    def create_database(self, name: str | None = None) -> str:
        """A new empty database owned by `user`; returns its psycopg URL."""
        database = name or f"db{next(_databases)}"
        with self._super() as connection:  # type: ignore[attr-defined]
            connection.execute(f'CREATE DATABASE "{database}" OWNER "{self.user}"')
        return self.url(database)

    def answers(self) -> bool:
        """Whether the server accepts a superuser connection."""
        try:
            with self._super():  # type: ignore[attr-defined]
                return True
        except Exception:
            return False


#: Settings that make a test server fast and not durable.
_FAST = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


@contextlib.contextmanager
def postgresql_server(*, durable: bool = False) -> Iterator[PostgresServer]:
    """Start a throwaway PostgreSQL server on a free loopback port; stop it and delete its data
    directory at the end. Fast but not durable (``fsync=off``, commits acknowledged before they
    are flushed) unless ``durable``: a server that tests stop the hard way must keep what it
    acknowledged, as a real one does."""
    binaries = postgres_bin()
    if binaries is None:
        missing("PostgreSQL's server (initdb, postgres)", "apt-get install postgresql")
    assert binaries is not None
    with contextlib.ExitStack() as stack:
        root = Path(tempfile.mkdtemp(prefix="study-postgres-"))
        stack.callback(shutil.rmtree, root, True)
        _chown_to_server_user(root)
        data, log = root / "data", root / "server.log"
        secret = root / "superuser.pw"
        secret.write_text(_SUPER_PASSWORD + "\n")
        _chown_to_server_user(secret)
        initdb = subprocess.run(
            _as_server_user(
                [
                    str(binaries / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    PG_SUPERUSER,
                    f"--pwfile={secret}",
                    "--auth-local=scram-sha-256",
                    "--auth-host=scram-sha-256",
                    "--encoding=UTF8",
                    "--no-sync",
                ]
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if initdb.returncode != 0:
            pytest.fail(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}{initdb.stderr}")
        port = free_port()
        postmaster = Postmaster(
            _as_server_user(
                [
                    str(binaries / "postgres"),
                    "-D",
                    str(data),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "-k",
                    str(root),
                    "-c",
                    "max_connections=200",
                    *([] if durable else _FAST),
                ]
            ),
            log,
        )
        server = PostgresServer(port=port, postmaster=postmaster)
        stack.callback(postmaster.stop, "fast")  # SIGINT: PostgreSQL's fast shutdown
        postmaster.start(server.answers)
        with server._super() as connection:  # type: ignore[attr-defined]
            connection.execute(f"CREATE ROLE \"{PG_USER}\" LOGIN PASSWORD '{PG_PASSWORD}' CREATEDB")
        yield server


# --------------------------------------------------------------------------------------------
# MLflow tracking server


def answers(url: str) -> bool:
    """Whether ``url`` answers HTTP 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class MlflowServer:
    """An ``mlflow server`` process on a fixed loopback port that a test can kill and start
    again on the same port, store and artifacts (a tracking server that goes away).

    Its CLI is forked from the test process' zygote (`tests.zygote`), which imported MLflow's
    CLI, server app and uvicorn once; the CLI forks its web server off itself
    (`tests.mlflow_cli`) instead of starting a fresh interpreter."""

    def __init__(self, root: Path, backend_store_uri: str | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root, self.port = root, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = backend_store_uri or f"sqlite:///{root / 'mlflow.db'}"
        self.process: Forked | None = None
        self.starts = 0

    @property
    def log(self) -> Path:
        """The last start's output (standard error; standard output is next to it)."""
        return self.root / f"server-{self.starts}.log"

    def start(self) -> None:
        """Start the server and wait until it answers (a new SQLite store is copied from the
        migrated template, `study.tracking.store_template`, as `study` makes its own)."""
        seed_new_store(self.store)
        env = dict(
            os.environ,
            MLFLOW_DISABLE_TELEMETRY="true",
            MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
            PYTHONWARNINGS="ignore",
        )
        env.pop("MLFLOW_TRACKING_URI", None)
        argv = [
            "server", "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", "1", "--backend-store-uri", self.store,
            "--serve-artifacts", "--artifacts-destination", str(self.root / "artifacts"),
        ]  # fmt: skip
        self.starts += 1
        out = self.log.with_suffix(".out")
        self.process = zygote().spawn(
            argv, cwd=self.root, env=env, stdout=out, stderr=self.log, module="tests.mlflow_cli"
        )
        _wait(lambda: answers(f"{self.url}/health"), self.process, self.log, "mlflow server")

    def stop(self, first: int = signal.SIGTERM) -> None:
        """Stop the server and its workers (``first``: SIGKILL for a crash)."""
        if self.process is not None:
            stop_group(self.process, first)
        self.process = None


@contextlib.contextmanager
def mlflow_process(root: Path, backend_store_uri: str | None = None) -> Iterator[MlflowServer]:
    """Start ``mlflow server`` on a free loopback port (as `mlflow_server`) and yield it, to
    stop and start again; it is stopped at the end."""
    server = MlflowServer(root, backend_store_uri)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def mlflow_server(root: Path, backend_store_uri: str | None = None) -> Iterator[str]:
    """Start ``mlflow server`` on a free loopback port and yield its URL.

    Args:
        root: where its log, its SQLite store (when ``backend_store_uri`` is None) and the
            artifacts it serves live.
        backend_store_uri: e.g. a `PostgresServer.create_database` URL; default
            ``sqlite:///<root>/mlflow.db``.
    """
    with mlflow_process(root, backend_store_uri) as server:
        yield server.url
