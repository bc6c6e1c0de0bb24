"""Fixtures every test directory may use: real services (tests/services.py).

* ``postgres`` (session): a running PostgreSQL server (`tests.services.PostgresServer`).
* ``postgres_url`` (per test): a fresh empty database on it, as a
  ``postgresql+psycopg://study:<password>@127.0.0.1:PORT/dbN`` URL; the SQLAlchemy engines
  the test creates are disposed at its end (``dispose_engines``, also usable alone).
* ``mlflow_server`` (session): an ``mlflow server`` with a SQLite store and served artifacts;
  ``STUDY_TEST_MLFLOW_URI`` names one already running instead.
* ``mlflow_server_pg`` (session): an ``mlflow server`` whose backend store is a database on
  ``postgres``.

The session caches generated data and the MLflow store template (`study.tracking.store_template`)
in a folder of its own (``STUDY_CACHE_DIR``, unless set), never in the user's ``~/.cache``.
The session pins ``STUDY_CODE_VERSION`` (`study.version`) to the code version it started with,
so the ``study`` processes it starts agree even when the sources are edited during the run.

A test that uses an extension's feature says so, ``@pytest.mark.extension("allocation")``
(every test under ``tests/ext/<name>/`` is marked with ``<name>``), and is skipped where that
extension is not loaded (``STUDY_EXTENSIONS=none`` runs the core's tests alone).

On x86-64 the session pins OpenBLAS's kernels to its AVX2 ones (``OPENBLAS_CORETYPE=Haswell``,
before NumPy loads it; the processes the tests start inherit it). OpenBLAS picks its kernels by
CPU, and its AVX-512 ones sum in another order: with them, the shipped quickstart ledger's
answer read B_noise 329 (98.8-924) instead of the 329 (101-932) the docs show, computed on an
AVX2 machine. Since answer model 11 (each mixture component's draws on a stream of their own,
the held fits descended until they settle) the kernels move the shipped reports' numbers by at
most a few parts in 10,000 (`tests/examples/test_shipped_reports.py` checks it where the CPU has
AVX-512); the pin makes the docs' checked output and the shipped reports read the same to the
last digit on any CPU the tests run on (`examples/make_reports.py` pins the same kernels).
"""

from __future__ import annotations

import os
import platform

if platform.machine() in ("x86_64", "AMD64"):  # before anything imports NumPy: see above
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from study.extension import EXTENSIONS_ENV, loaded
from study.version import PIN, code_version
from tests.services import PostgresServer, postgresql_server
from tests.services import mlflow_server as start_mlflow_server

os.environ[PIN] = code_version()
if not os.environ.get("STUDY_CACHE_DIR"):
    os.environ["STUDY_CACHE_DIR"] = _CACHE = tempfile.mkdtemp(prefix="study-tests-cache-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

EXTENSION_TESTS = Path(__file__).parent / "ext"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests under ``tests/ext/<name>/`` with their extension, and skip each test whose
    extension is not loaded."""
    names = {extension.name for extension in loaded()}
    for item in items:
        if item.path.is_relative_to(EXTENSION_TESTS):
            item.add_marker(pytest.mark.extension(item.path.relative_to(EXTENSION_TESTS).parts[0]))
        needed = {n for mark in item.iter_markers("extension") for n in mark.args} - names
        if needed:
            given = os.environ.get(EXTENSIONS_ENV)
            why = f"{EXTENSIONS_ENV}={given}" if given else "not installed"
            plural = "s" if len(needed) > 1 else ""
            listed = ", ".join(repr(n) for n in sorted(needed))
            reason = f"needs the extension{plural} {listed} ({why})"
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session (started on first use)."""
    with postgresql_server() as server:
        yield server


@pytest.fixture
def dispose_engines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Dispose every SQLAlchemy engine a test creates (each RDB storage holds one) at its end,
    so no connection to the server is left for the garbage collector to find open (psycopg
    warns of each with a ResourceWarning)."""
    import sqlalchemy

    engines: list[sqlalchemy.Engine] = []
    create = sqlalchemy.engine.create_engine

    def tracked(*args: Any, **kwargs: Any) -> sqlalchemy.Engine:
        engines.append(create(*args, **kwargs))
        return engines[-1]

    monkeypatch.setattr(sqlalchemy, "create_engine", tracked)  # how study and these tests call it
    monkeypatch.setattr(sqlalchemy.engine, "create_engine", tracked)  # how Optuna calls it
    yield
    for engine in engines:
        engine.dispose()


@pytest.fixture
def postgres_url(postgres: PostgresServer, dispose_engines: None) -> str:
    """A new empty database for one test, with the test role's password in the URL."""
    return postgres.create_database()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a running MLflow tracking server (SQLite store, served artifacts)."""
    given = os.environ.get("STUDY_TEST_MLFLOW_URI")
    if given:
        yield given.rstrip("/")
        return
    with start_mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


@pytest.fixture(scope="session")
def mlflow_server_pg(
    postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The URL of a running MLflow tracking server whose backend store is PostgreSQL."""
    store = postgres.create_database("mlflow")
    with start_mlflow_server(tmp_path_factory.mktemp("mlflow-server-pg"), store) as url:
        yield url
