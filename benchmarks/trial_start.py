"""What a trainer worker's first trial costs, and its second: CPU-seconds in a worker forked
from a process that imported what the forkserver imports (`study.runner.preload`).

Each round forks a worker as the forkserver would, which sets up TensorFlow's runtime
(`study.runner.worker._Runtime`, one logical CPU) and runs the tests' tabular trial
(`tests.fakes.tabular_spec`, seed 7) twice: the first trial builds the session (model, optimizer,
the traced training and evaluation functions), the second reuses it. Prints the median over
``--rounds`` of each part's CPU-seconds and writes them to ``benchmarks/results/trial_start.json``
(or ``--out``). Run it on two checkouts to compare them.

Usage: python benchmarks/trial_start.py [--rounds 5] [--out PATH]
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
sys.path.insert(0, str(ROOT))

OUT = ROOT / "benchmarks" / "results" / "trial_start.json"
PARTS = ("runtime", "first_trial", "second_trial")


def child(rounds: int) -> list[dict[str, float]]:
    """In a fresh process: the preload's imports, then ``rounds`` forked workers."""
    import study.runner.preload  # noqa: F401 - what the forkserver imports
    from tests.fakes import tabular_spec

    spec = tabular_spec(strategy="default", seed=7)
    runs = []
    for _ in range(rounds):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(read)
            from study.runner.worker import _Runtime

            marks = [time.process_time()]
            runtime = _Runtime(1)
            marks.append(time.process_time())
            for _ in range(2):
                runtime.run(spec, None)
                marks.append(time.process_time())
            cpu = {p: b - a for p, a, b in zip(PARTS, marks, marks[1:])}
            os.write(write, json.dumps(cpu).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            runs.append(json.loads(pipe.read()))
        os.waitpid(pid, 0)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(args.rounds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    summary = {p: round(statistics.median(r[p] for r in runs), 2) for p in PARTS}
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
    result = {"commit": git.stdout.decode().strip(), "summary": summary, "runs": runs}
    print(f"CPU-seconds of a forked worker, median of {args.rounds}:")
    for part in PARTS:
        print(f"  {part:13s} {summary[part]:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
