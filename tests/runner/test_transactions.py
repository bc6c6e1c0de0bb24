"""Storage transactions per trial (issue 20 item 3): a whole ``study run`` on a real PostgreSQL
commits at most `MAX_PER_TRIAL` transactions per trial, reads and the study's set-up included,
and stores the same information: every trial's result, curve and Optuna intermediate values
(what optuna-dashboard plots), its params and its Optuna state.

Counted by the server, as `benchmarks/study_scaleout.py` counts them: the database's
``pg_stat_database.xact_commit`` (every committed transaction, a connection check's
``SELECT 1`` included), read once the run's connections are closed (a backend reports its
counts when it exits). ``study run`` runs in this process; its trainer workers never touch the
storage. Without PostgreSQL's binaries the test is skipped, except under ``CI=1``
(`tests.services.missing`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from optuna.trial import TrialState as OptunaState

from study.ledger import Ledger
from study.results import TrialState
from tests.inprocess import study_here
from tests.runner.conftest import tiny_study, write_study
from tests.services import PostgresServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

#: The issue's bound.
MAX_PER_TRIAL = 15
#: 2 batch sizes x 6 trials, the Optuna tuner (as `benchmarks/study_scaleout.py` runs it).
DATA = tiny_study(name="commits", trials_per_stratum=6)


def committed(server: PostgresServer, database: str) -> tuple[int, int]:
    """(transactions committed, backends connected) of ``database``, asked from another one."""
    with server._super() as connection:  # type: ignore[attr-defined]
        connection.execute("SELECT pg_stat_clear_snapshot()")
        row = connection.execute(
            "SELECT xact_commit, numbackends FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    return int(row[0]), int(row[1])


def test_a_study_commits_at_most_15_transactions_per_trial(
    postgres: PostgresServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = postgres.create_database()
    database = url.rsplit("/", 1)[1]
    engines: list[sqlalchemy.Engine] = []
    create = sqlalchemy.engine.create_engine

    def tracked(*args: Any, **kwargs: Any) -> sqlalchemy.Engine:
        engines.append(create(*args, **kwargs))
        return engines[-1]

    monkeypatch.setattr(sqlalchemy, "create_engine", tracked)
    monkeypatch.setattr(sqlalchemy.engine, "create_engine", tracked)
    file = write_study(tmp_path, DATA)
    before, _ = committed(postgres, database)
    done = study_here(
        monkeypatch, capsys, "run", file.name, "--storage", url, "--tuner", "optuna", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    for engine in engines:
        engine.dispose()  # its backends exit and report what they committed
    seen: list[int] = []

    def settled() -> bool:  # every backend gone and its count reported
        count, backends = committed(postgres, database)
        seen.append(count)
        return backends == 0 and len(seen) > 1 and seen[-1] == seen[-2]

    wait_until(settled, 30, "the run's transactions counted", poll=0.5)
    transactions = seen[-1] - before

    ledger = Ledger.open(url, "commits")
    trials = [t for stratum in ledger.strata() for t in ledger.trials(stratum)]
    assert len(trials) == 12 and all(t.status.is_outcome() for t in trials)
    per_trial = transactions / len(trials)
    print(f"{transactions} transactions for {len(trials)} trials: {per_trial:.1f} per trial")
    assert 0 < per_trial <= MAX_PER_TRIAL

    for stratum in ledger.strata():
        study_id = ledger.storage.get_study_id_from_name(f"commits/{stratum}")
        for frozen, t in zip(
            ledger.storage.get_all_trials(study_id), ledger.trials(stratum), strict=True
        ):
            assert t.result is not None and t.result.curve and t.tuner == "optuna"
            assert "learning_rate" in frozen.params and frozen.user_attrs["owner"]
            if t.status is not TrialState.FAILED:
                assert frozen.intermediate_values  # what optuna-dashboard plots
            expected = OptunaState.PRUNED if t.status is TrialState.PRUNED else OptunaState.COMPLETE
            assert frozen.state is expected
