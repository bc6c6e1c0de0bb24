"""A tracking server that goes away under a running study and comes back (issue 20): a real
``mlflow server`` killed (SIGKILL) while trials run and started again on the same port and
store. The study never waits for it: trials go on finishing, one warning line says logging
pauses, one line says the server answers again, and by the end of that same ``study run``
every finished trial is in MLflow exactly once, nothing is left RUNNING and MLflow mirrors the
ledger (the catch-up is the repair a resume does, from the ledger).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    write_study,
)
from tests.runner.outages import finished, lasting_study, write_paced
from tests.services import mlflow_process
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

PER_STRATUM = 6
#: 12 trials of a few seconds each, so the study outlasts the server's absence and its restart.
DATA = lasting_study("tracking-outage", PER_STRATUM)


def test_trials_finished_while_the_server_was_away_reach_mlflow_in_the_same_run(
    tmp_path: Path, background
) -> None:
    with mlflow_process(tmp_path / "mlflow") as server:
        store = Store(tmp_path, uri=server.url)
        write_paced(tmp_path)
        file = write_study(tmp_path, DATA)
        runner: Background = background(
            "run", file.name, "--tracking-uri", server.url, cwd=tmp_path
        )
        wait_until(
            lambda: finished(store, DATA, fresh=True) >= 1,
            240,
            "a finished trial",
            detail=runner.text,
        )
        server.stop(signal.SIGKILL)
        at_kill = finished(store, DATA, fresh=True)
        wait_until(
            lambda: "stopped answering" in runner.output()[1],
            120,
            "the warning",
            detail=runner.text,
        )
        wait_until(
            lambda: finished(store, DATA, fresh=True) > at_kill,
            120,
            "a trial finished while it was away",
        )
        assert runner.process.poll() is None, runner.text()  # the study did not wait or die
        server.start()
        assert runner.wait(400) == 0, runner.text()

        err = runner.output()[1]
        assert "Traceback" not in err, err
        assert err.count("stopped answering") == 1 and err.count("answers again") == 1, err
        assert "did not answer again" not in err, err
        by_stratum = store.trials(DATA, fresh=True)
        assert_budget_spent(by_stratum, PER_STRATUM)
        assert_mlflow_mirrors_ledger(store, DATA, by_stratum)
