"""Storage load on loopback: N simulated workers against PostgreSQL directly and through the
gRPC storage proxy (``study serve-storage``), N = 8, 32, 128.

A simulated worker replays one trial's storage calls after another, as the runner makes them
(`study.runner.engine`), through the product's own ledger (`study.ledger.Ledger`, opened from
the URL as ``study worker`` opens it, retry wrapper and trial cache included), with no
training in between: read the stratum's counted trials and claim a slot (its first heartbeat
stamped), read the stratum's history, record the proposed params and start the trial, stamp
one heartbeat, and finish it with a 40-point curve against a target (intermediate values,
result attributes, close). That is a trial shorter than one ``heartbeat.interval`` (10 s); a
longer trial adds one stamp per interval. Tracking (MLflow) calls are left out: the tracking
server is a service of its own, measured by ``benchmarks/study_scaleout.py``.

Workers are threads, at most `PER_PROCESS` to a client process (128 processes importing the
ledger would not fit this machine's memory); each has its own ledger, storage and connection
(or gRPC channel). Each N runs on a fresh database for `--seconds` after every worker has
opened its ledger; a worker starts no trial after that and finishes the one it is in.

Measured per (mode, N): trials/hour (finished trials over the time from the start signal to
the last worker's end); the client processes' CPU per trial; p50/p99 of a claim's latency (the counted read plus the claim, as the
runner's ``_claim`` does); server CPU per trial, read from ``/proc`` (utime + stime of the
server's process tree, PostgreSQL's exited backends included; the proxy's process separately);
PostgreSQL transactions per trial (``pg_stat_database.xact_commit``); connections open to the
database once every worker has opened its ledger. The server is PostgreSQL as the tests start
it (`tests.services`, ``fsync=off``, ``max_connections`` raised to 600: each directly connected
worker holds two); clients, proxy and server
share this machine's cores, so with the clients busy these are floors for servers on hosts of
their own.

Usage: nice -n 10 python benchmarks/storage_load.py [--workers 8 32 128] [--seconds 10]
       [--modes direct proxy] [--cap TRIALS_PER_WORKER] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))

from markdown import table  # noqa: E402
from server_counts import backends, db_stats, tree_cpu  # noqa: E402

from tests.services import PostgresServer, free_port, postgresql_server  # noqa: E402

#: Simulated workers per client process (threads).
PER_PROCESS = 8
#: Strata the workers spread over (batch sizes 8 ... 2^18), so no stratum grows huge.
STRATA = 16
#: The study's name in every database.
NAME = "load"
#: PostgreSQL's ``max_connections`` here (its default is 100; the tests' server 200).
MAX_CONNECTIONS = 600
#: Grace of the simulated trials' heartbeats, in seconds (no trial lasts that long).
GRACE = 60.0


def _worker(url: str, index: int, seconds: float, cap: int, ready: Any, go: Any, out: list) -> None:
    """One simulated worker (a thread): open the ledger, wait for ``go``, replay trials for
    ``seconds`` (at most ``cap``); append (trials, claim latencies) to ``out``."""
    import optuna

    from study.config.space import Stratum
    from study.config.target import Target
    from study.ledger import Ledger
    from study.results import Measurement, TrialResult, TrialState

    try:
        ledger = Ledger.open(url, NAME)
    except Exception as exc:  # say why, and do not keep the others waiting
        chain, cause = [], exc
        while cause is not None and len(chain) < 4:
            chain.append(f"{type(cause).__name__}: {' '.join(str(cause).split())[-300:]}")
            cause = cause.__cause__ or cause.__context__
        out.append((0, [], " <- ".join(chain)))
        ready.release()
        return
    target = Target.parse("val_accuracy>=0.85")
    curve = tuple(
        Measurement(10 * i, 1280 * i, 0.01 * i, 1.0 / (i + 1), {"val_accuracy": 0.5 + i / 100})
        for i in range(1, 41)
    )
    result = TrialResult(
        state=TrialState.REACHED, steps_run=400, examples_run=51200, train_seconds=0.4,
        steps_to_target=360, curve=curve, timings={"train": 0.4, "wall": 0.5},
    )  # fmt: skip
    dist = {"learning_rate": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)}
    recent = getattr(ledger, "recent", None) or contextlib.nullcontext
    ready.release()
    go.wait()
    end = time.monotonic() + seconds
    done, claims = 0, []
    while time.monotonic() < end and done < cap:
        stratum = Stratum(2 ** ((index + done) % STRATA + 3), "default")
        started = time.perf_counter()
        ledger.counted(stratum)
        slot = ledger.claim(stratum, budget=10**9, grace=GRACE)
        claims.append(time.perf_counter() - started)
        assert slot is not None
        with recent():
            ledger.trials(stratum)  # the history the tuner proposes from
            rate = 0.01 * (1 + (index * 7919 + done) % 97)
            ledger.tuning.record_params(slot, {"learning_rate": rate}, dist)
            ledger.start(slot, tuner="optuna", origin="sampler")
        ledger.liveness.beat(slot, GRACE)
        ledger.finish(slot, result, 360.0, target=target, meaning="steps to the target")
        done += 1
    out.append((done, claims, None))


def _client(
    url: str, first: int, count: int, seconds: float, cap: int, ready: Any, go: Any, q: Any
) -> None:
    """A client process running ``count`` simulated workers; puts (trials, latencies)."""
    out: list = []
    threads = [
        threading.Thread(target=_worker, args=(url, first + i, seconds, cap, ready, go, out))
        for i in range(count)
    ]
    for t in threads:
        t.start()
    go.wait()
    before = os.times()
    for t in threads:
        t.join()
    after = os.times()
    cpu = (after.user - before.user) + (after.system - before.system)
    errors = [e for _, _, e in out if e]
    q.put((sum(n for n, _, _ in out), [c for _, cs, _ in out for c in cs], errors, cpu))


@contextlib.contextmanager
def served(url: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """``study serve-storage`` in front of ``url``: its address and its /proc marker."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "study", "serve-storage", "--storage", url, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        if "serving" not in line:
            raise RuntimeError(f"the proxy did not start: {line}")
        yield f"grpc://127.0.0.1:{port}", ("serve-storage", "--port", str(port))
    finally:
        process.terminate()
        process.wait(30)


def load_run(
    server: PostgresServer, mode: str, workers: int, seconds: float, cap: int
) -> dict[str, Any]:
    """``workers`` simulated workers on a fresh database, directly or through the proxy."""
    from study.ledger import Ledger, StudyRecord

    database = f"load_{mode}_{workers}"
    url = server.create_database(database)
    Ledger.open(url, NAME).create(StudyRecord(NAME, config_text=f"name: {NAME}"))
    with contextlib.ExitStack() as stack:
        address, proxy_marker = url, None
        if mode == "proxy":
            address, proxy_marker = stack.enter_context(served(url))
        ctx = mp.get_context("spawn")
        ready, go, q = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
        procs, first = [], 0
        while first < workers:
            count = min(PER_PROCESS, workers - first)
            procs.append(
                ctx.Process(
                    target=_client, args=(address, first, count, seconds, cap, ready, go, q)
                )
            )
            first += count
        for p in procs:
            p.start()
        opening = time.monotonic()
        for _ in range(workers):  # every worker has opened its ledger (or failed to)
            if not ready.acquire(timeout=300):
                raise RuntimeError("simulated workers did not start in 300 s")
        setup = time.monotonic() - opening
        pg_marker = ("-p", str(server.port))
        connections = backends(server, database)
        before = db_stats(server, database)
        pg_cpu = tree_cpu(pg_marker)
        proxy_cpu = tree_cpu(proxy_marker) if proxy_marker else 0.0
        started = time.monotonic()
        go.set()
        results = [q.get(timeout=seconds + 600) for _ in procs]
        wall = time.monotonic() - started
        pg_cpu = tree_cpu(pg_marker) - pg_cpu
        proxy_cpu = (tree_cpu(proxy_marker) - proxy_cpu) if proxy_marker else 0.0
        for p in procs:
            p.join(60)
        stats = db_stats(server, database) - before
    errors = [e for r in results for e in r[2]]
    if errors:
        raise RuntimeError(f"{len(errors)} simulated workers failed, e.g. {errors[0][:1500]}")
    trials = sum(r[0] for r in results)
    claims = sorted(c for r in results for c in r[1])
    n = max(trials, 1)
    return {
        "mode": mode,
        "workers": workers,
        "processes": len(procs),
        "trials": trials,
        "wall_s": round(wall, 2),
        "setup_s": round(setup, 1),
        "trials_per_hour": round(3600 * trials / wall),
        "claim_p50_ms": round(1000 * statistics.median(claims), 1) if claims else math.nan,
        "claim_p99_ms": round(1000 * _quantile(claims, 0.99), 1) if claims else math.nan,
        "pg_cpu_ms_per_trial": round(1000 * pg_cpu / n, 2),
        "proxy_cpu_ms_per_trial": round(1000 * proxy_cpu / n, 2),
        "client_cpu_ms_per_trial": round(1000 * sum(r[3] for r in results) / n, 2),
        "pg_xacts_per_trial": round(stats.xacts / n, 1),
        "pg_connections": connections,
        "pg_rows_written_per_trial": round(stats.rows_written / n, 1),
    }


def allow_connections(server: PostgresServer, count: int) -> None:
    """Restart the server with ``max_connections`` at ``count`` (the tests start it with 200,
    on its command line): each directly connected worker holds connections of its own."""
    postmaster = server.postmaster
    assert postmaster is not None
    postmaster.argv = [
        f"max_connections={int(count)}" if a.startswith("max_connections=") else a
        for a in postmaster.argv
    ]
    server.restart_after(lambda: None, mode="fast")


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def commit() -> str:
    """The commit measured (with ``+changes`` if the checkout differs from it)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:  # e.g. an export of a commit (git archive): named by $STUDY_COMMIT
        return os.environ.get("STUDY_COMMIT", "unknown")
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "study")
    return head + ("+changes" if dirty else "")


_HEADER = ("N", "mode", "trials/hour", "claim p50 ms", "claim p99 ms", "PG CPU ms/trial",
           "proxy CPU ms/trial", "client CPU ms/trial", "PG transactions/trial",
           "PG connections")  # fmt: skip


def _row(r: dict[str, Any]) -> list[object]:
    """One run's line of the results table (`_HEADER`)."""
    proxy = r["proxy_cpu_ms_per_trial"] if r["mode"] == "proxy" else "-"
    return [r["workers"], r["mode"], f"{r['trials_per_hour']:,}", r["claim_p50_ms"],
            r["claim_p99_ms"], r["pg_cpu_ms_per_trial"], proxy, r["client_cpu_ms_per_trial"],
            r["pg_xacts_per_trial"], r["pg_connections"]]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--modes", nargs="+", default=["direct", "proxy"])
    parser.add_argument("--seconds", type=float, default=10.0, help="per (mode, N)")
    parser.add_argument("--cap", type=int, default=2000, help="trials per worker at most")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "commit": commit(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "runs": [],
    }
    print(f"commit {results['commit']}; load before: {results['load_before']}", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="storage-load-"), postgresql_server() as server:
        allow_connections(server, MAX_CONNECTIONS)
        for workers in args.workers:
            for mode in args.modes:
                run = load_run(server, mode, workers, args.seconds, args.cap)
                results["runs"].append(run)
                print(json.dumps(run), flush=True)
    results["load_after"] = os.getloadavg()
    results["total_s"] = round(time.monotonic() - started)
    print(f"load after: {results['load_after']}; {results['total_s']} s in all")
    print("\n" + table(_HEADER, [_row(r) for r in results["runs"]]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
