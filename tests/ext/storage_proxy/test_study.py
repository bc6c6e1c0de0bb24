"""A study run through Optuna's gRPC storage proxy: a real PostgreSQL server behind a real
``study serve-storage`` process, and every command on ``--storage grpc://HOST:PORT``.

``study run`` creates the study (one trial), two ``study worker`` processes (each in its own
directory, under its own host name) spend the rest of the budget; the database, read directly,
holds exactly the budget, nothing open, every trial in MLflow once. ``study status``,
``study report``, ``study export`` and ``study resume`` work through the proxy, and
``study.load`` from Python; the report through the proxy is the report read from the database
directly. The proxy stops on SIGTERM with exit 0.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import study as study_api
from tests.inprocess import study_in
from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    counted,
    start_study,
    tiny_study,
    write_study,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

DATA = tiny_study(name="proxied", trials_per_stratum=3, heartbeat={"interval": 1, "grace": 3})


@pytest.fixture
def proxy(postgres_url: str, tmp_path: Path) -> Iterator[tuple[str, Background]]:
    """``study serve-storage`` in front of a fresh database: its address and its process."""
    (tmp_path / "proxy").mkdir()
    served = start_study(
        "serve-storage", "--storage", postgres_url, "--port", "0", cwd=tmp_path / "proxy"
    )
    line = wait_until(
        lambda: served.output()[0] or (served.process.poll() is not None and served.text()),
        60,
        "the proxy's line",
    )
    assert line.startswith("study serve-storage: serving "), served.text()
    yield line.split(" at ", 1)[1].split()[0], served
    served.stop()


def report(cwd: Path, name: str, storage: str) -> dict:
    """``study report NAME --format json`` from ``storage``, without what says when and from
    where it was made."""
    out = cwd / f"report-{len(list(cwd.glob('report-*')))}"
    options = ("--no-mlflow", "--format", "json", "--out", str(out))
    result = study_in("report", name, "--storage", storage, *options, cwd=cwd)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    data = json.loads((out / "report.json").read_text())
    del data["created"], data["command"], data["context"]["storage"]
    return data


def test_a_study_runs_through_the_proxy_with_two_workers(
    proxy: tuple[str, Background], postgres_url: str, mlflow_server: str, tmp_path: Path
) -> None:
    address, served = proxy
    urls = ("--storage", address, "--tracking-uri", mlflow_server)
    hosts: list[Background] = []
    try:
        for name in ("host-0", "host-1", "host-2"):
            (tmp_path / name).mkdir()
        file = write_study(tmp_path / "host-0", DATA)
        with pytest.MonkeyPatch.context() as env:  # the first host: this test's process
            env.setenv("STUDY_HOST", "host-0")
            first = study_in(
                "run", file.name, "--tuner", "optuna", "--max-trials", "1", *urls,
                cwd=tmp_path / "host-0", cache=tmp_path / "cache",
            )  # fmt: skip
        assert first.returncode == 0, first.stderr[-3000:]
        for h in (first.stdout, first.stderr):
            assert "Traceback" not in h and "not answering" not in h, h
        for name in ("host-1", "host-2"):
            env = {"STUDY_HOST": name, "STUDY_CACHE_DIR": str(tmp_path / "cache")}
            hosts.append(start_study("worker", DATA["name"], *urls, cwd=tmp_path / name, env=env))
        codes = [h.wait(300) for h in hosts]
        assert codes == [0, 0], [h.text()[-2000:] for h in hosts]
        for h in hosts:
            assert "Traceback" not in h.text() and "not answering" not in h.text(), h.text()
    finally:
        for h in hosts:
            h.stop()

    direct = Store(tmp_path, storage_url=postgres_url, uri=mlflow_server)  # the database itself
    trials = direct.trials(DATA, fresh=True)
    assert_budget_spent(trials, DATA["trials_per_stratum"])
    assert_mlflow_mirrors_ledger(direct, DATA, trials)
    kept = [t for ts in trials.values() for t in counted(ts)]
    owners = {(t.owner or "").split(":")[0] for t in kept}
    assert "host-0" in owners and owners <= {"host-0", "host-1", "host-2"} and len(owners) >= 2

    status = study_in("status", DATA["name"], "--storage", address, "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    summary = json.loads(status.stdout)
    assert (summary["trials_done"], summary["trials_total"]) == (len(kept), len(kept))
    assert report(tmp_path, DATA["name"], address) == report(tmp_path, DATA["name"], postgres_url)
    out = tmp_path / "table.csv"
    exported = study_in(
        "export", DATA["name"], "--storage", address, "--out", str(out), cwd=tmp_path
    )
    assert exported.returncode == 0 and out.stat().st_size > 0, exported.stderr
    resumed = study_in("resume", DATA["name"], *urls, cwd=tmp_path / "host-1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]  # nothing left: done at once
    assert len(counted([t for ts in direct.trials(DATA, fresh=True).values() for t in ts])) == len(
        kept
    )
    loaded = study_api.load(DATA["name"], storage=address, tracking_uri=mlflow_server)
    assert len(loaded.trials()) == len(kept)

    served.process.send_signal(signal.SIGTERM)
    assert served.wait(30) == 0, served.text()
    assert served.output()[1] == ""
