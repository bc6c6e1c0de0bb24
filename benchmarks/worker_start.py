"""How long a trainer worker takes to start: forked from the TensorFlow server, or spawned.

A study starts a worker for each device configuration it trains on (``default``, ``mirrored:2``
and so on), and again whenever the pool is full and a trial needs another configuration. This
benchmark checks one small trial (`study.runner.WorkerPool.check`: start a worker, load the
tabular data, build the model) with a one-slot pool that alternates ``default`` and
``mirrored:2``, so every check starts a new worker, and does so under each start method
(``STUDY_START_METHOD``), each in its own process, in turn, ``--rounds`` times. It prints, per
method, the first check's wall time (the process' first worker, the forkserver's start and its
TensorFlow import included), the median of the later ones, and the CPU seconds of the workers
and the forkserver together.

Usage: python benchmarks/worker_start.py [--checks 6] [--rounds 3] [--out results/worker_start.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("spawn", "forkserver")
STRATEGIES = ("default", "mirrored:2")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a live process (``/proc/PID/stat``), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parent_pid(pid: int) -> int:
    """The parent of a live process, 0 if it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except OSError:
        return 0


def child(checks: int) -> dict:
    """Run in a fresh process: ``checks`` checks alternating the strategies in a one-slot pool."""
    from study.config.target import Target
    from study.config.trial import Budget, OptimizerSpec, TrialSettings, TrialSpec
    from study.runner import WorkerPool, spawning

    walls, cpu, parents = [], 0.0, set()
    with WorkerPool(1) as pool:
        for index in range(checks):
            spec = TrialSpec(
                workload="tabular",
                workload_options={"rows": 2000},
                batch_size=64,
                optimizer=OptimizerSpec(name="nesterov", learning_rate=0.1),
                target=Target.parse("val_accuracy>=0.99"),
                strategy=STRATEGIES[index % len(STRATEGIES)],
                settings=TrialSettings(budget=Budget(max_steps=30)),
            )
            started = time.perf_counter()
            problem = pool.check(spec)
            walls.append(time.perf_counter() - started)
            if problem is not None:
                raise SystemExit(f"check failed: {problem}")
            workers = [pid for pids in pool.pids().values() for pid in pids]
            cpu += sum(cpu_seconds(pid) for pid in workers)
            parents.update(parent_pid(pid) for pid in workers)
    # A forked worker's parent is the forkserver, which imported TensorFlow: its CPU counts.
    cpu += sum(cpu_seconds(pid) for pid in parents - {os.getpid(), 0})
    return {"walls": walls, "cpu_seconds": cpu, "method": spawning.start_method()}


def measure(method: str, checks: int) -> dict:
    env = {**os.environ, "STUDY_START_METHOD": method, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(checks)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    runs: dict[str, list[dict]] = {m: [] for m in METHODS}
    for _ in range(args.rounds):
        for method in METHODS:
            runs[method].append(measure(method, args.checks))
    summary = {}
    for method, results in runs.items():
        firsts = [r["walls"][0] for r in results]
        laters = [w for r in results for w in r["walls"][1:]]
        cpus = [r["cpu_seconds"] / len(r["walls"]) for r in results]
        summary[method] = {
            "first_check_s": statistics.median(firsts),
            "later_check_s": statistics.median(laters),
            "later_check_range_s": [min(laters), max(laters)],
            "cpu_s_per_worker": statistics.median(cpus),
        }
        print(
            f"{method:>10}: first check {summary[method]['first_check_s']:.2f} s, later checks "
            f"{summary[method]['later_check_s']:.2f} s (median; {min(laters):.2f}-"
            f"{max(laters):.2f}), {summary[method]['cpu_s_per_worker']:.2f} CPU-s per worker "
            f"(forkserver included)"
        )
    if args.out is not None:
        args.out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
