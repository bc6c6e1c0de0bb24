"""Several trials at once: two `study run` processes on one store, and ``--workers 2`` in one
process. Either way each stratum gets exactly its budget of trials and MLflow one run per trial.
Two trials per stratum (four in all) are enough for two workers to overlap and race for the last.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from study.ledger import LedgerTrial
from tests.inprocess import study_here
from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    counted,
    status,
    tiny_study,
    write_study,
)

pytestmark = pytest.mark.slow


def owner_pid(t: LedgerTrial) -> int:
    """The pid of the process that claimed a trial (owner ``host:pid:start``)."""
    assert t.owner is not None
    return int(t.owner.split(":")[1])


def overlapping(trials: list[LedgerTrial]) -> int:
    """How many pairs of trials ran at the same time."""
    spans = sorted((t.started_at or 0.0, t.finished_at or 0.0) for t in trials)
    return sum(1 for i, a in enumerate(spans) for b in spans[i + 1 :] if b[0] < a[1])


def test_two_processes_share_one_study(
    tmp_path: Path, background: Callable[..., Background]
) -> None:
    data = tiny_study(name="shared", trials_per_stratum=2, tuner={"pruning": False})
    file = write_study(tmp_path, data)
    store = Store(tmp_path)

    jobs = [background("run", str(file), cwd=tmp_path, tag=f"run{i}") for i in range(2)]
    codes = [job.wait(240) for job in jobs]

    assert codes == [0, 0], [job.output()[1][-2000:] for job in jobs]
    for job in jobs:
        assert "Traceback" not in job.output()[1]
    trials = store.trials(data, fresh=True)
    assert_budget_spent(trials, data["trials_per_stratum"])
    everything = [t for ts in trials.values() for t in ts]
    assert {status(t) for t in everything} <= {"reached", "not_reached", "discarded"}
    assert {owner_pid(t) for t in everything} <= {job.pid for job in jobs}
    runs = assert_mlflow_mirrors_ledger(store, data, trials)
    assert len(runs) == sum(len(counted(ts)) for ts in trials.values())


def test_two_workers_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tiny_study(name="two-workers", trials_per_stratum=2, tuner={"pruning": False})
    file = write_study(tmp_path, data)
    store = Store(tmp_path)

    result = study_here(monkeypatch, capsys, "run", str(file), "--workers", "2", cwd=tmp_path)

    assert result.returncode == 0, result.stderr[-3000:]
    trials = store.trials(data, fresh=True)
    assert_budget_spent(trials, data["trials_per_stratum"])
    everything = [t for ts in trials.values() for t in ts]
    assert len({t.owner for t in everything}) == 1
    assert overlapping([t for t in everything if status(t) != "discarded"]) > 0
    assert_mlflow_mirrors_ledger(store, data, trials)
