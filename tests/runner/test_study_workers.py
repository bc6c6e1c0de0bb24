"""Workers on several "hosts" sharing one study through PostgreSQL and an MLflow server.

Each worker is a separate `study` process in a directory of its own (nothing shared on disk:
the ledger is in PostgreSQL, MLflow behind its tracking server) and names its host with
``$STUDY_HOST``, so workers judge each other by heartbeats only, as on separate machines.
The study is made by ``study run FILE --max-trials 1``; ``study worker NAME`` processes join it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from study.config.space import Stratum
from study.ledger import Ledger, LedgerTrial
from study.results import TrialState
from tests.inprocess import study_each
from tests.runner.conftest import (
    Background,
    Store,
    assert_budget_spent,
    assert_mlflow_mirrors_ledger,
    counted,
    freeze_when,
    running_with_run,
    start_study,
    status,
    tiny_study,
    trial_key,
    write_study,
)
from tests.runner.outages import write_paced
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

#: Heartbeat of these studies: stamped every second, a host silent for 3 s is dead.
HEARTBEAT = {"interval": 1, "grace": 3}


@dataclass
class Cluster:
    """Starts `study` processes as hosts of one study (each in ``root/NAME``, naming its host
    NAME, with the storage and tracking URLs); kills what is left at the end."""

    root: Path
    storage_url: str
    uri: str
    hosts: list[Background] = field(default_factory=list)

    def start(self, name: str, *args: str) -> Background:
        cwd = self.root / name
        cwd.mkdir()
        write_paced(cwd)  # the paced model, for studies that use it
        urls = ("--storage", self.storage_url, "--tracking-uri", self.uri)
        env = {"STUDY_HOST": name, "STUDY_CACHE_DIR": str(cwd / "cache")}
        host = start_study(*args, *urls, cwd=cwd, env=env)
        self.hosts.append(host)
        return host

    def store(self) -> Store:
        """The study's two stores, as the hosts see them."""
        return Store(self.root, storage_url=self.storage_url, uri=self.uri)

    def close(self) -> None:
        for host in self.hosts:
            host.stop()


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str, mlflow_server: str) -> Iterator[Cluster]:
    nodes = Cluster(tmp_path, postgres_url, mlflow_server)
    yield nodes
    nodes.close()


def make_study(cluster: Cluster, data: dict[str, Any]) -> Background:
    """Create the study with one trial (``study run FILE --max-trials 1``), as a first host."""
    (cluster.root / "files").mkdir()
    file = write_study(cluster.root / "files", data)
    first = cluster.start("host-0", "run", str(file), "--tuner", "optuna", "--max-trials", "1")
    code = first.wait()
    assert code == 0, first.text()[-3000:]
    return first


def owner_host(t: LedgerTrial) -> str:
    """The host named in a trial's owner (empty while its claim is being written)."""
    return (t.owner or "").split(":")[0]


def report_files(cwd: Path, name: str, storages: list[str]) -> list[dict[str, str]]:
    """``study report NAME --format json --format csv`` from each of ``storages`` (one after
    the other in one Python process, into ``cwd/report-0``, ...): file name -> text for each,
    the JSON without what says when and how it was made (the time, the command, the storage)."""
    options = ("--no-mlflow", "--format", "json", "--format", "csv")
    outs = [cwd / f"report-{index}" for index in range(len(storages))]
    commands = [
        (cwd, ["report", name, "--storage", storage, "--out", str(out), *options])
        for storage, out in zip(storages, outs)
    ]
    reports = []
    for result, out in zip(study_each(commands, logs=cwd / "report-logs"), outs):
        assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
        files = {p.name: p.read_text() for p in sorted(out.iterdir()) if p.is_file()}
        report = json.loads(files.pop("report.json"))
        del report["created"], report["command"], report["context"]["storage"]
        files["report.json"] = json.dumps(report, indent=1, sort_keys=True)
        reports.append(files)
    return reports


def replay(source: Ledger, target: Ledger, strata: list[Stratum]) -> None:
    """Write ``source``'s counted trials into ``target`` one after the other, through the
    ledger's own path (claim, params, start, finish), as a single worker would have."""
    import optuna

    record = source.require()
    target.create(record)
    trials = sorted(
        (t for s in strata for t in counted(source.trials(s))), key=lambda t: t.started_at or 0
    )
    for t in trials:
        assert t.result is not None
        slot = target.claim(t.stratum, budget=1000)
        assert slot is not None
        dist = optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)
        target.tuning.record_params(slot, t.params, {"learning_rate": dist})
        extras = {k: v for k, v in t.extras.items() if k != "objective"}
        target.start(slot, tuner=str(t.tuner), origin=str(t.origin), extras=extras)
        target.finish(slot, t.result, float(t.score or 0.0), meaning=t.extras.get("objective"))


# 2 batch sizes x 3 trials; the first host runs one, three workers share the other five, at
# most two each (so every one of them runs at least one, however late it starts).
SHARED = tiny_study(name="shared-hosts", trials_per_stratum=3, heartbeat=HEARTBEAT)
PER_WORKER = 2


def test_three_workers_share_a_study_and_report_as_one(cluster: Cluster, tmp_path: Path) -> None:
    make_study(cluster, SHARED)
    workers = [
        cluster.start(f"host-{i}", "worker", SHARED["name"], "--max-trials", str(PER_WORKER))
        for i in (1, 2, 3)
    ]
    codes = [w.wait() for w in workers]

    assert codes == [0, 0, 0], [w.text()[-2000:] for w in workers]
    for w in workers:
        assert "Traceback" not in w.text(), w.text()[-3000:]
    store = cluster.store()
    trials = store.trials(SHARED, fresh=True)
    assert_budget_spent(trials, SHARED["trials_per_stratum"])  # exact count, none left open
    kept = [t for ts in trials.values() for t in counted(ts)]
    assert len(kept) == 2 * SHARED["trials_per_stratum"]
    assert {status(t) for t in kept} <= {"reached", "not_reached", "pruned"}, [
        (t.number, status(t), t.result.error[-1000:] if t.result and t.result.error else None)
        for t in kept
    ]
    for stratum, ts in trials.items():  # no trial run twice
        rates = [t.params["learning_rate"] for t in counted(ts)]
        assert len(set(rates)) == len(rates), stratum
    hosts = Counter(owner_host(t) for t in kept)
    assert set(hosts) == {"host-0", "host-1", "host-2", "host-3"} and hosts["host-0"] == 1
    assert max(hosts.values()) <= PER_WORKER  # --max-trials
    runs = assert_mlflow_mirrors_ledger(store, SHARED, trials)  # every run closed, one per trial
    assert len(runs) == len(kept)
    parent = [r for r in store.runs(SHARED["name"]) if r.data.tags.get("study.role") == "parent"]
    assert [r.info.status for r in parent] == ["FINISHED"]

    # The report from the shared ledger is the report of the same records written by one.
    single = Ledger.open(str(tmp_path / "single.journal"), SHARED["name"])
    replay(store.ledger(SHARED["name"]), single, [Stratum(b, "default") for b in (32, 128)])
    shared_report, single_report = report_files(
        tmp_path, SHARED["name"], [cluster.storage_url, str(tmp_path / "single.journal")]
    )
    assert {"report.json", "trials.csv", "measurements.csv"} <= set(shared_report)
    # A stratum's trial numbers are the order the database numbered the claims; hosts claiming
    # at once can be numbered in another order than the one they started in, which a replay in
    # start order cannot reproduce: the numbers within a stratum are compared as a set.
    shared_rows, single_rows = (
        pd.read_csv(io.StringIO(report.pop("measurements.csv")))
        for report in (shared_report, single_report)
    )
    key = ["batch_size", "strategy", "stratum_trial"]
    assert sorted(map(tuple, shared_rows[key].drop_duplicates().to_numpy())) == sorted(
        map(tuple, single_rows[key].drop_duplicates().to_numpy())
    )
    pd.testing.assert_frame_equal(
        shared_rows.drop(columns="stratum_trial"), single_rows.drop(columns="stratum_trial")
    )
    assert shared_report == single_report


# One batch size, 4 trials that never reach the target and run 2,000 paced steps each
# (`tests.runner.outages.PACED_MODEL`: 3 s of pauses, however loaded the machine), no pruning:
# host-1 is stopped (SIGSTOP) inside one whose MLflow run shows RUNNING and killed while
# stopped. With 4,000 real steps a trial took a second or two, and under load MLflow's
# low-priority logging thread showed the run only after the trial ended.
KILLED = tiny_study(
    name="killed-host",
    trials_per_stratum=4,
    target="val_accuracy>=0.999",
    budget={"max_steps": 2000},
    eval_every=400,
    model="paced:build",
    search_space={"batch_size": [128]},
    tuner={"pruning": False},
    heartbeat=HEARTBEAT,
)


def test_a_killed_hosts_trial_runs_again_after_the_grace(cluster: Cluster, tmp_path: Path) -> None:
    make_study(cluster, KILLED)
    store = cluster.store()
    doomed = cluster.start("host-1", "worker", KILLED["name"])
    survivor = cluster.start("host-2", "worker", KILLED["name"])
    stratum = "b128/default"

    victim = wait_until(
        lambda: freeze_when(
            doomed.pid,
            lambda: running_with_run(store, KILLED, stratum, lambda t: owner_host(t) == "host-1"),
        ),
        120,
        "host-1 to run a trial logged to MLflow",
        poll=0.2,
    )
    doomed.signal_group(signal.SIGKILL)  # while stopped: its trial cannot end in between
    killed_at = time.time()
    doomed.wait(30)

    assert survivor.wait() == 0, survivor.text()[-3000:]
    trials = store.trials(KILLED, fresh=True)
    after = next(t for t in trials[stratum] if t.number == victim.number)
    assert (after.status, after.open) == (TrialState.INTERRUPTED, False)
    assert "host-1" in survivor.text() and "stopped answering" in survivor.text()
    frozen = store.storage().get_trial(
        store.ledger(KILLED["name"]).access.trial_id(Stratum(128, "default"), victim.number)
    )
    closed_after = frozen.datetime_complete.timestamp() - killed_at
    # The last stamp came at most an interval before the kill; the grace runs from there.
    assert closed_after >= HEARTBEAT["grace"] - HEARTBEAT["interval"] - 0.5, closed_after
    assert_budget_spent(trials, KILLED["trials_per_stratum"])
    rerun = [t for t in counted(trials[stratum]) if t.number > victim.number]
    assert any(owner_host(t) == "host-2" for t in rerun)
    runs = assert_mlflow_mirrors_ledger(store, KILLED, trials)
    run = runs[trial_key(KILLED["name"], stratum, victim.number)]
    assert (run.info.status, run.data.tags["status"]) == ("KILLED", "interrupted")


# Trials that never reach the target and run 20,000 steps, so SIGTERM lands inside one.
TERMINATED = tiny_study(
    name="terminated",
    trials_per_stratum=3,
    target="val_accuracy>=0.999",
    budget={"max_steps": 20000},
    eval_every=100,
    search_space={"batch_size": [128]},
    tuner={"pruning": False},
)


def test_sigterm_closes_the_running_trial_and_exits_143(
    tmp_path: Path, background: Callable[..., Background]
) -> None:
    """SIGTERM to the study process alone (what Kubernetes sends to a container's first
    process) stops it as Ctrl-C does."""
    file = write_study(tmp_path, TERMINATED)
    store = Store(tmp_path)
    job = background("run", str(file), "--tuner", "optuna", cwd=tmp_path)
    stratum = "b128/default"

    victim = wait_until(
        lambda: running_with_run(store, TERMINATED, stratum),
        120,
        "a trial to run with its MLflow run open",
        poll=0.3,
    )
    os.kill(job.pid, signal.SIGTERM)
    code = job.wait(120)

    out, err = job.output()
    assert code == 143, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    trials = store.trials(TERMINATED, fresh=True)
    stopped = next(t for t in trials[stratum] if t.number == victim.number)
    assert (stopped.status, stopped.open) == (TrialState.INTERRUPTED, False)
    assert not any(t.open for t in trials[stratum])
    runs = assert_mlflow_mirrors_ledger(store, TERMINATED, trials)
    run = runs[trial_key(TERMINATED["name"], stratum, victim.number)]
    assert (run.info.status, run.data.tags["status"]) == ("KILLED", "interrupted")
    parent = [
        r for r in store.runs(TERMINATED["name"]) if r.data.tags.get("study.role") == "parent"
    ]
    assert [r.info.status for r in parent] == ["KILLED"]  # no other worker goes on
