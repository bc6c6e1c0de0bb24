"""Scale-out: 1, 2 and 3 workers on one study through PostgreSQL and an MLflow server, and what
each trial costs those two services; then how much of that each service sustains here.

Both services are started as the tests start them (`tests.services`: PostgreSQL on a loopback
port, ``fsync=off``; ``mlflow server`` with a PostgreSQL backend store and served artifacts).
For each worker count a fresh database holds the study: ``study run FILE`` on one "host" and
``study worker NAME`` on the others, each in a temporary directory of its own with its own
``$STUDY_HOST`` (no shared disk). Measured per run:

* trials/hour: trials over the wall time from the first process's start to the last one's exit
  (startup included), and over the span from the first trial's start to the last one's end;
* storage, per trial: PostgreSQL transactions (``pg_stat_database.xact_commit``, less this
  script's own polls for the study to appear: one connection, one transaction per answered
  poll and one for the connection), rows written
  (``tup_inserted + tup_updated + tup_deleted``) and server-side seconds (``active_time``) of
  the study's database, and the ledger's ``bookkeeping`` seconds (a trial's wall time outside
  the trainer: ledger writes, tuner, MLflow hand-off); heartbeat writes are 1 per running trial
  per ``heartbeat.interval``;
* tracking, per trial: MLflow REST calls (the server's access log) and the seconds the
  workers' MLflow threads spent in them (what ``study run`` prints).

Capacity (``--capacity``, the default): N client processes replay the ledger's write sequence
of one trial (claim, reservation, params, start, finish with a 40-point curve) as fast as they can on a
fresh database: sequences/s is the storage's ceiling in trials/s; and N client threads send the
tracker's per-trial MLflow calls (create a run, one ``log-batch`` of a trial's size, terminate)
as fast as they can: calls/s over calls per trial is the tracking server's ceiling. Clients,
servers and workers share this machine's 2 cores, so every number is a floor for a real
deployment with the services on their own hosts.

Usage: python benchmarks/study_scaleout.py [--workers 1 2 3] [--no-capacity] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))
os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"

from markdown import table  # noqa: E402
from server_counts import db_stats, tree_cpu  # noqa: E402

from tests.services import PostgresServer, mlflow_server, postgresql_server  # noqa: E402

#: The study every worker count runs: tabular (5,000 rows), 3 batch sizes x 6 trials, each run to
#: its step budget (a target no trial reaches, no pruning), so every trial trains as long as the
#: others (a second or two here); Optuna only.
STUDY: dict[str, Any] = {
    "name": "scaleout",
    "workload": "tabular",
    "workload_options": {"rows": 5000},
    "target": "val_accuracy>=0.999",
    "budget": {"max_steps": 6000},
    "eval_every": 200,
    "trials_per_stratum": 6,
    "search_space": {
        "batch_size": [32, 64, 128],
        "learning_rate": {"low": 1.0e-2, "high": 0.3, "scale": "log"},
        "strategy": ["default"],
    },
    "tuner": {"pruning": False},
}
#: Transactions this script's own polls (`study_exists`) committed, by database.
_POLLS: Counter[str] = Counter()
_API = re.compile(r'"(GET|POST|PATCH|DELETE) (/api/[^ ?"]+)')
_MLFLOW_BUSY = re.compile(r"MLflow logging \(background thread\): ([0-9.]+) s wall")


@dataclass
class Servers:
    """The two services: PostgreSQL and the MLflow server, and their CPU use so far."""

    pg: PostgresServer
    uri: str
    log: Path

    def cpu(self) -> tuple[float, float]:
        """CPU seconds of (PostgreSQL, the MLflow server) so far."""
        port = self.uri.rsplit(":", 1)[1]
        return (
            tree_cpu(("-p", str(self.pg.port))),
            tree_cpu(("server", "--port", port)),
        )


@dataclass
class ScaleRun:
    workers: int
    trials: int
    wall_s: float
    span_s: float
    trials_per_hour_wall: float
    trials_per_hour_span: float
    mean_trial_wall_s: float
    mean_train_s: float
    mean_bookkeeping_s: float
    pg_xacts_per_trial: float
    pg_rows_written_per_trial: float
    pg_rows_read_per_trial: float
    pg_active_ms_per_trial: float
    pg_cpu_ms_per_trial: float
    heartbeat_writes_per_trial: float
    mlflow_calls_per_trial: float
    mlflow_calls: dict[str, int]
    mlflow_seconds_per_trial: float
    mlflow_server_cpu_ms_per_trial: float


def start_host(name: str, args: list[str], work: Path) -> tuple[subprocess.Popen[bytes], Path]:
    cwd = work / name
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env |= {"STUDY_HOST": name, "STUDY_CACHE_DIR": str(cwd / "cache"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = open(cwd / "out.txt", "wb")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(
        [sys.executable, "-m", "study", *args],
        cwd=cwd,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out.close()
    return process, cwd / "out.txt"


def poll_connection(server: PostgresServer, database: str) -> Any:
    """A connection to ``database`` for `study_exists`; opening it commits one transaction
    (a backend's start does), counted in `_POLLS`."""
    import psycopg

    _POLLS[database] += 1
    return psycopg.connect(
        host=server.host, port=server.port, user=server.user, password=server.password,
        dbname=database, autocommit=True,
    )  # fmt: skip


def study_exists(conn: Any, database: str, name: str) -> bool:
    """Whether ``study run`` has stored the study (asked in SQL on ``conn``, one connection
    for all the polls: opening an Optuna storage on a database another process is creating the
    tables of can collide with it, and each new connection is a transaction of the database)."""
    import psycopg

    try:
        row = conn.execute("SELECT 1 FROM studies WHERE study_name = %s", (name,)).fetchone()
    except psycopg.Error:  # no tables yet (a failed query commits nothing)
        return False
    _POLLS[database] += 1  # one transaction of the study's database that is not the study's
    return row is not None


def scale_run(servers: Servers, workers: int, work: Path) -> ScaleRun:
    """Run `STUDY` with ``workers`` processes on a fresh database; measure it."""
    from study.config.space import Stratum
    from study.ledger import Ledger

    name = f"{STUDY['name']}-w{workers}"
    database = f"scaleout_w{workers}"
    server, uri, log = servers.pg, servers.uri, servers.log
    url = server.create_database(database)
    file = work / f"{name}.yaml"
    file.write_text(yaml.safe_dump({**STUDY, "name": name}, sort_keys=False))
    urls = ["--storage", url, "--tracking-uri", uri]
    before, log_start = db_stats(server, database), log.stat().st_size
    cpu_before = servers.cpu()
    start = time.time()
    procs = [start_host("host-0", ["run", str(file), "--tuner", "optuna", *urls], work)]
    if workers > 1:
        with poll_connection(server, database) as conn:
            while not study_exists(conn, database, name):
                if procs[0][0].poll() is not None:
                    raise RuntimeError(procs[0][1].read_text()[-3000:])
                time.sleep(0.2)
    procs += [start_host(f"host-{i}", ["worker", name, *urls], work) for i in range(1, workers)]
    for process, out in procs:
        if process.wait() != 0:
            raise RuntimeError(f"{out}: {out.read_text()[-3000:]}")
    wall = time.time() - start
    after = db_stats(server, database) - before
    after.xacts -= _POLLS[database]
    pg_cpu, mlflow_cpu = (b - a for a, b in zip(cpu_before, servers.cpu(), strict=True))
    with open(log, "rb") as handle:
        handle.seek(log_start)
        calls = Counter(m.group(2) for m in _API.finditer(handle.read().decode(errors="replace")))
    busy = sum(
        float(m.group(1)) for _, out in procs for m in _MLFLOW_BUSY.finditer(out.read_text())
    )
    ledger = Ledger.open(url, name, create=False)
    trials = [
        t
        for b in STUDY["search_space"]["batch_size"]
        for t in ledger.counted(Stratum(b, "default"))
    ]
    n = len(trials)
    span = max(t.finished_at or 0 for t in trials) - min(t.started_at or 0 for t in trials)
    timings = [t.result.timings for t in trials if t.result is not None]
    mean = lambda key: statistics.fmean(x.get(key, 0.0) for x in timings)  # noqa: E731
    return ScaleRun(
        workers=workers,
        trials=n,
        wall_s=wall,
        span_s=span,
        trials_per_hour_wall=3600 * n / wall,
        trials_per_hour_span=3600 * n / span,
        mean_trial_wall_s=mean("wall"),
        mean_train_s=mean("train"),
        mean_bookkeeping_s=mean("bookkeeping"),
        pg_xacts_per_trial=after.xacts / n,
        pg_rows_written_per_trial=after.rows_written / n,
        pg_rows_read_per_trial=after.rows_read / n,
        pg_active_ms_per_trial=after.active_ms / n,
        pg_cpu_ms_per_trial=1000 * pg_cpu / n,
        heartbeat_writes_per_trial=mean("wall") / 10.0,  # the default interval, 10 s
        mlflow_calls_per_trial=sum(calls.values()) / n,
        mlflow_calls=dict(calls.most_common()),
        mlflow_seconds_per_trial=busy / n,
        mlflow_server_cpu_ms_per_trial=1000 * mlflow_cpu / n,
    )


# --------------------------------------------------------------------------------------------
# Capacity of each service


def _ledger_client(url: str, seconds: float, counter: Any, start: Any) -> None:
    """Replay one trial's ledger writes in a loop for ``seconds``; count them."""
    import optuna

    from study.config.space import Stratum
    from study.config.target import Target
    from study.ledger import Ledger
    from study.results import Measurement, TrialResult, TrialState

    ledger = Ledger.open(url, "capacity")
    curve = tuple(
        Measurement(10 * i, 1280 * i, 0.01 * i, 1.0 / (i + 1), {"val_accuracy": 0.5 + i / 100})
        for i in range(40)
    )
    result = TrialResult(
        state=TrialState.REACHED, steps_run=400, steps_to_target=390, curve=curve,
        timings={"train": 1.0, "wall": 1.5},
    )  # fmt: skip
    dist = {"learning_rate": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)}
    target = Target.parse("val_accuracy>=0.8")
    start.wait()
    end = time.monotonic() + seconds
    done = 0
    while time.monotonic() < end:
        stratum = Stratum(2 ** (done % 6 + 3), "default")
        slot = ledger.claim(stratum, budget=10**9, grace=60.0)
        assert slot is not None
        rate = 0.05 + 1e-6 * done
        ledger.tuning.reserve(slot, {"learning_rate": rate, "seed": None})
        ledger.tuning.record_params(slot, {"learning_rate": rate}, dist)
        ledger.start(slot, tuner="optuna", origin="sampler")
        ledger.liveness.beat(slot, 60.0)
        ledger.finish(slot, result, 390.0, target=target, meaning="steps")
        done += 1
    with counter.get_lock():
        counter.value += done


def storage_capacity(servers: Servers, clients: int, seconds: float) -> dict[str, float]:
    """Trials' ledger write sequences per second ``clients`` processes get through, and the
    server's CPU and statement time per sequence."""
    server = servers.pg
    from study.ledger import Ledger, StudyRecord

    database = f"capacity_{clients}"
    url = server.create_database(database)
    Ledger.open(url, "capacity").create(StudyRecord("capacity", config_text="name: capacity"))
    ctx = mp.get_context("spawn")
    counter, start = ctx.Value("i", 0), ctx.Event()
    procs = [
        ctx.Process(target=_ledger_client, args=(url, seconds, counter, start))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    time.sleep(8)  # let every client import and connect
    before, cpu = db_stats(server, database), servers.cpu()[0]
    start.set()
    for p in procs:
        p.join()
    cpu = servers.cpu()[0] - cpu
    stats = db_stats(server, database) - before
    n = max(counter.value, 1)
    return {
        "clients": clients,
        "sequences_per_s": counter.value / seconds,
        "xacts_per_sequence": stats.xacts / n,
        "rows_written_per_sequence": stats.rows_written / n,
        "server_cpu_ms_per_sequence": 1000 * cpu / n,
        "server_active_ms_per_sequence": stats.active_ms / n,
    }


def _beat_client(url: str, seconds: float, counter: Any, start: Any) -> None:
    """Stamp one running trial's heartbeat in a loop for ``seconds``; count the stamps."""
    from study.config.space import Stratum
    from study.ledger import Ledger
    from study.ledger.liveness import stamp

    ledger = Ledger.open(url, "capacity")
    slot = ledger.claim(Stratum(4096, "default"), budget=10**9, grace=60.0)
    assert slot is not None
    start.wait()
    end, done = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        stamp(ledger, ledger._slot_id(slot), 60.0)  # the write of a beat (`Liveness.beat`)
        done += 1
    with counter.get_lock():
        counter.value += done


def heartbeat_capacity(servers: Servers, clients: int, seconds: float) -> dict[str, float]:
    """Heartbeat stamps per second ``clients`` processes get through, and the server's CPU
    per stamp (each client stamps its own running trial)."""
    from study.ledger import Ledger, StudyRecord

    url = servers.pg.create_database(f"beats_{clients}")
    Ledger.open(url, "capacity").create(StudyRecord("capacity", config_text="name: capacity"))
    ctx = mp.get_context("spawn")
    counter, start = ctx.Value("i", 0), ctx.Event()
    procs = [
        ctx.Process(target=_beat_client, args=(url, seconds, counter, start))
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    time.sleep(8)
    cpu = servers.cpu()[0]
    start.set()
    for p in procs:
        p.join()
    cpu = servers.cpu()[0] - cpu
    return {
        "clients": clients,
        "beats_per_s": counter.value / seconds,
        "server_cpu_ms_per_beat": 1000 * cpu / max(counter.value, 1),
    }


def tracking_capacity(servers: Servers, threads: int, seconds: float) -> dict[str, float]:
    """MLflow calls per second ``threads`` clients get through, each sending one trial's calls
    (create run, a log-batch of 40 x 5 curve points, 30 params and 10 tags, terminate)."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    uri = servers.uri
    client = MlflowClient(uri)
    experiment = client.create_experiment(f"capacity-{threads}-{time.time_ns()}")
    now = int(time.time() * 1000)
    metrics = [Metric(f"curves/m{k}", 0.5, now, 10 * i) for i in range(40) for k in range(5)]
    params = [Param(f"p{i}", str(i)) for i in range(30)]
    tags = [RunTag(f"t{i}", str(i)) for i in range(10)]
    calls, lock = [0], threading.Lock()
    end = time.monotonic() + seconds

    def loop() -> None:
        own = MlflowClient(uri)
        done = 0
        while time.monotonic() < end:
            run = own.create_run(experiment)
            own.log_batch(run.info.run_id, metrics=metrics, params=params, tags=tags)
            own.set_terminated(run.info.run_id)
            done += 3
        with lock:
            calls[0] += done

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    cpu = servers.cpu()[1]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    cpu = servers.cpu()[1] - cpu
    return {
        "server_cpu_ms_per_call": 1000 * cpu / max(calls[0], 1),
        "threads": threads,
        "calls_per_s": calls[0] / seconds,
        "trials_per_s": calls[0] / 3 / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--no-capacity", action="store_true")
    parser.add_argument("--seconds", type=float, default=20.0, help="per capacity measurement")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}", flush=True)
    results: dict[str, Any] = {
        "runs": [], "storage_capacity": [], "heartbeat_capacity": [], "tracking_capacity": []
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="scaleout-") as tmp, postgresql_server() as server:
        work = Path(tmp)
        store = server.create_database("mlflow")
        with mlflow_server(work / "mlflow", store) as uri:
            servers = Servers(server, uri, work / "mlflow" / "server.log")
            for n in args.workers:
                run_dir = work / f"w{n}"
                run_dir.mkdir()
                run = scale_run(servers, n, run_dir)
                results["runs"].append(asdict(run))
                print(json.dumps(asdict(run)), flush=True)
            if not args.no_capacity:
                for clients in (1, 2, 4):
                    cap = storage_capacity(servers, clients, args.seconds)
                    results["storage_capacity"].append(cap)
                    print("storage", json.dumps(cap), flush=True)
                for clients in (1, 4):
                    cap = heartbeat_capacity(servers, clients, args.seconds)
                    results["heartbeat_capacity"].append(cap)
                    print("heartbeat", json.dumps(cap), flush=True)
                for threads in (1, 2, 4):
                    cap = tracking_capacity(servers, threads, args.seconds)
                    results["tracking_capacity"].append(cap)
                    print("tracking", json.dumps(cap), flush=True)
    print(f"load after: {os.getloadavg()}")
    _print_table(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


_HEADER = ("workers", "trials", "wall s", "trials/h (wall)", "trials/h (span)", "mean trial s",
           "bookkeeping s", "PG xacts/trial", "PG rows written/trial", "PG CPU ms/trial",
           "MLflow calls/trial", "MLflow client s/trial", "MLflow server CPU ms/trial")  # fmt: skip


def _row(r: dict[str, Any]) -> list[object]:
    """One run's line of the results table (`_HEADER`)."""
    return [r["workers"], r["trials"], f"{r['wall_s']:.1f}", f"{r['trials_per_hour_wall']:.0f}",
            f"{r['trials_per_hour_span']:.0f}", f"{r['mean_trial_wall_s']:.2f}",
            f"{r['mean_bookkeeping_s']:.3f}", f"{r['pg_xacts_per_trial']:.0f}",
            f"{r['pg_rows_written_per_trial']:.0f}", f"{r['pg_cpu_ms_per_trial']:.0f}",
            f"{r['mlflow_calls_per_trial']:.1f}", f"{r['mlflow_seconds_per_trial']:.3f}",
            f"{r['mlflow_server_cpu_ms_per_trial']:.0f}"]  # fmt: skip


def _print_table(results: dict[str, Any]) -> None:
    print("\n" + table(_HEADER, [_row(r) for r in results["runs"]]))
    for cap in results["storage_capacity"]:
        print(f"storage: {cap}")
    for cap in results["heartbeat_capacity"]:
        print(f"heartbeat: {cap}")
    for cap in results["tracking_capacity"]:
        print(f"tracking: {cap}")


if __name__ == "__main__":
    main()
