"""A database that goes away under a running study (issue 20): a real PostgreSQL server of the
test's own, stopped the hard way (immediate shutdown: every connection dropped, no checkpoint)
while trials run.

- Back within the retry window: every worker waits, says so in one line and in one more when
  the storage answers again, and finishes; the budget is spent exactly, no trial is recorded
  twice, nothing is left running, every finished trial is in MLflow once.
- Away longer than the window: one warning line, then one line naming the storage (its
  password masked), exit status 75, no traceback; once it is back, ``study resume`` finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from study.errors import EXIT_TEMPFAIL
from tests.inprocess import study_here
from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    tiny_study,
    write_study,
)
from tests.runner.outages import finished, lasting_study, write_paced
from tests.services import PostgresServer, postgresql_server
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

PER_STRATUM = 10
#: 20 trials of a few seconds each, so the study outlasts a second worker's start and the
#: outage (a trial's bookkeeping is a few transactions now, so the first worker gets through
#: trials faster).
DATA = lasting_study("outage", PER_STRATUM)


#: 4 short trials: what the outage interrupts, then what ``study resume`` finishes.
SHORT = tiny_study(name="outage", trials_per_stratum=2)


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server this test may stop and start (the session's is shared), durable as
    a real one: what it acknowledged survives its immediate shutdown."""
    with postgresql_server(durable=True) as server:
        yield server


def claimed_by(store: Store, pid: int) -> bool:
    """Whether the process ``pid`` (on this host) claimed a trial of the study."""
    trials = [t for ts in store.trials(DATA).values() for t in ts]
    return any((t.owner or "").split(":")[1:2] == [str(pid)] for t in trials)


def on_services(
    server: PostgresServer, cwd: Path, data: dict
) -> tuple[Store, Path, tuple[str, ...]]:
    """A new database on ``server`` and a local MLflow store for the study ``data`` (its file
    written in ``cwd``, with its model `write_paced`): the stores, the file, and the ``--storage``/``--tracking-uri`` flags."""
    url, tracking = server.create_database(), f"sqlite:///{cwd / 'mlflow.db'}"
    store = Store(cwd, storage_url=url, uri=tracking)
    write_paced(cwd)
    return store, write_study(cwd, data), ("--storage", url, "--tracking-uri", tracking)


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_workers_wait_through_a_restart_and_finish_the_budget(
    own_postgres: PostgresServer, tmp_path: Path, background, dispose_engines: None
) -> None:
    store, file, args = on_services(own_postgres, tmp_path, DATA)
    runner: Background = background("run", file.name, *args, cwd=tmp_path)
    wait_until(lambda: finished(store, DATA) >= 1, 240, "a finished trial", detail=runner.text)
    joiner = background("worker", "outage", *args, "--workers", "2", cwd=tmp_path, tag="worker")
    wait_until(lambda: claimed_by(store, joiner.pid), 240, "the worker's first claim")
    assert finished(store, DATA) < 2 * PER_STRATUM - 2  # trials are left to run through the outage

    def outage() -> None:  # down until both processes said they wait for it
        for job in (runner, joiner):
            wait_until(lambda j=job: "is not answering" in j.output()[1], 120, "the warning")

    own_postgres.restart_after(outage)
    assert runner.wait(300) == 0, runner.text()
    assert joiner.wait(300) == 0, joiner.text()
    for job in (runner, joiner):
        err = job.output()[1]
        assert "Traceback" not in err, err
        assert err.count("is not answering") == 1 and err.count("answers again") == 1, err
        assert own_postgres.password not in job.text()
    by_stratum = store.trials(DATA, fresh=True)
    assert_budget_spent(by_stratum, PER_STRATUM)
    assert_mlflow_mirrors_ledger(store, DATA, by_stratum)


def test_an_outage_past_the_window_exits_75_and_resume_finishes(
    own_postgres: PostgresServer,
    tmp_path: Path,
    background,
    dispose_engines: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, file, args = on_services(own_postgres, tmp_path, SHORT)
    runner = background("run", file.name, *args, "--storage-retry", "4", cwd=tmp_path)
    wait_until(lambda: finished(store, SHORT) >= 1, 240, "a finished trial", detail=runner.text)
    own_postgres.restart_after(lambda: runner.wait(120))
    assert runner.process.returncode == EXIT_TEMPFAIL, runner.text()
    # The study is too small for the model to answer (said at its start), then the outage.
    err = [x for x in lines(runner.output()[1]) if "the model of every trial" not in x]
    assert len(err) == 2, err  # the warning, then the error
    assert "is not answering" in err[0] and "retrying for up to 4 s" in err[0]
    assert err[1].startswith("study run: error: the storage postgresql+psycopg://study:***@")
    assert "did not answer for 4 s" in err[1] and own_postgres.password not in runner.text()
    resumed = study_here(monkeypatch, capsys, "resume", "outage", *args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    by_stratum = store.trials(SHORT, fresh=True)
    assert_budget_spent(by_stratum, 2)
    assert_mlflow_mirrors_ledger(store, SHORT, by_stratum)
