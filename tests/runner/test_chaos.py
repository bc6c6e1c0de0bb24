"""Chaos (issue 20): a 3-worker study on a real PostgreSQL and a real ``mlflow server`` while a
driver (`tests.chaos`), at moments drawn from a fixed seed, SIGKILLs one worker and SIGTERMs
another (each started again), restarts PostgreSQL the hard way and kills and restarts the
tracking server. At the end: exactly the budget of finished trials, none twice, nothing left
RUNNING in the ledger or in MLflow, every finished trial in MLflow once, and no worker that
exited unasked. benchmarks/chaos.py runs 20 such rounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos import chaos_round, describe
from tests.services import MlflowServer, PostgresServer, mlflow_process, postgresql_server

pytestmark = pytest.mark.slow


@pytest.fixture
def services(tmp_path: Path) -> Iterator[tuple[PostgresServer, MlflowServer]]:
    """A durable PostgreSQL server and an mlflow server of this test's own (it restarts both)."""
    with postgresql_server(durable=True) as pg, mlflow_process(tmp_path / "mlflow") as tracking:
        yield pg, tracking


def test_a_study_survives_killed_workers_and_restarted_services(
    services: tuple[PostgresServer, MlflowServer], tmp_path: Path, dispose_engines: None
) -> None:
    pg, tracking = services
    verdict = chaos_round(pg, tracking, tmp_path, seed=1, per_stratum=4, deadline_s=300)

    assert verdict.clean, describe(verdict)
    assert verdict.finished == verdict.budget == 8
    assert len(verdict.events) == 4, describe(verdict)
