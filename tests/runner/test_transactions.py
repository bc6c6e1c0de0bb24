"""Storage transactions per trial (issue 20 item 3): a whole ``study run`` on a real PostgreSQL
commits at most `MAX_PER_TRIAL` transactions per trial, reads and the study's set-up included,
and stores the same information: every trial's result, curve and Optuna intermediate values
(what optuna-dashboard plots), its params and its Optuna state. So does a study of two workers
(``study run`` and ``study worker`` in two processes), each worker's start-up and its waiting
for the other's last trials included.

Counted by the server, as `benchmarks/study_scaleout.py` counts them: the database's
``pg_stat_database.xact_commit`` (every committed transaction, a connection check's
``SELECT 1`` included), read once the run's connections are closed (a backend reports its
counts when it exits). ``study run`` runs in this process; its trainer workers never touch the
storage. Without PostgreSQL's binaries the test is skipped, except under ``CI=1``
(`tests.services.missing`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from optuna.trial import TrialState as OptunaState

from study.ledger import Ledger
from study.results import TrialState
from tests.inprocess import study_here
from tests.runner.conftest import Background, tiny_study, write_study
from tests.services import PostgresServer
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

#: The issue's bound.
MAX_PER_TRIAL = 15
#: 2 batch sizes x 6 trials, the Optuna tuner (as `benchmarks/study_scaleout.py` runs it).
DATA = tiny_study(name="commits", trials_per_stratum=6)


#: 3 batch sizes x 6 trials run to their step budget (no pruning, a target no trial reaches),
#: so the worker that starts second still finds trials to claim (as the scale-out benchmark).
FLEET = tiny_study(
    name="fleet",
    trials_per_stratum=6,
    target="val_accuracy>=0.999",
    budget={"max_steps": 1200},
    eval_every=100,
    search_space={"batch_size": [32, 64, 128]},
    tuner={"pruning": False},
)


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


def settled_count(server: PostgresServer, database: str) -> int:
    """``database``'s committed transactions once no backend is connected and the count
    stopped moving (a backend reports its counts when it exits)."""
    seen: list[int] = []

    def settled() -> bool:
        count, backends = committed(server, database)
        seen.append(count)
        return backends == 0 and len(seen) > 1 and seen[-1] == seen[-2]

    wait_until(settled, 30, "the run's transactions counted", poll=0.5)
    return seen[-1]


def test_two_workers_commit_at_most_15_transactions_per_trial(
    postgres: PostgresServer, tmp_path: Path, background: Callable[..., Background]
) -> None:
    import psycopg

    url = postgres.create_database()
    database = url.rsplit("/", 1)[1]
    hosts = [tmp_path / "host-0", tmp_path / "host-1"]
    for host in hosts:
        host.mkdir()
    file = write_study(hosts[0], FLEET)
    before, _ = committed(postgres, database)
    # At most half the trials in the first process: under load the second one's start-up
    # (TensorFlow in its trainer) can outlast the whole study, and both must run trials.
    run = background(
        "run", file.name, "--storage", url, "--tuner", "optuna", "--max-trials", "9", cwd=hosts[0]
    )
    own = 1  # this test's transactions in the database: its connection's start, its answers
    with psycopg.connect(
        host=postgres.host, port=postgres.port, user=postgres.user,
        password=postgres.password, dbname=database, autocommit=True,
    ) as conn:  # fmt: skip

        def stored() -> bool:  # asked in SQL: an Optuna storage could race the table creation
            nonlocal own
            assert run.process.poll() is None, run.text()[-3000:]
            try:
                row = conn.execute("SELECT 1 FROM studies WHERE study_name = 'fleet'").fetchone()
            except psycopg.Error:  # no tables yet: nothing committed
                return False
            own += 1
            return row is not None

        wait_until(stored, 180, "study run to store the study", poll=0.5)
    worker = background("worker", "fleet", "--storage", url, cwd=hosts[1], tag="worker")
    assert worker.wait(300) == 0, worker.text()[-3000:]
    assert run.wait(300) == 0, run.text()[-3000:]
    transactions = settled_count(postgres, database) - before - own

    ledger = Ledger.open(url, "fleet")
    trials = [t for stratum in ledger.strata() for t in ledger.counted(stratum)]
    assert len(trials) == 18 and all(t.status.is_outcome() for t in trials)
    owners = {t.owner for t in trials}
    assert len(owners) == 2, f"one process ran every trial: {owners}"  # two workers, really
    per_trial = transactions / len(trials)
    print(f"2 workers: {transactions} transactions for {len(trials)} trials: {per_trial:.1f}")
    assert 0 < per_trial <= MAX_PER_TRIAL
