"""What a host forked from a warm process costs just to exit, by what the warm process holds.

The tests' zygote (`tests.zygote`) imports what a host imports, then forks hosts. A forked
host that exits at once still pays the interpreter's exit: a last garbage collection and the
teardown of every module, which touch (and copy on write) the whole inherited heap. This
forks ``--rounds`` children from this process, each exiting at once, in three states:
``plain`` (the zygote's imports), ``tensorflow`` (and TensorFlow, unstarted) and ``frozen``
(both, then ``gc.freeze``, as the zygote now does). Prints the median CPU-seconds and minor
page faults of a child, and writes them to ``benchmarks/results/host_exit.json``.

Usage: python benchmarks/host_exit.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.zygote import PRELOAD  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "host_exit.json"


def child_exit() -> tuple[float, int]:
    """Fork a child that exits at once (as a host does, exit handlers and all): its
    CPU-seconds and minor page faults."""
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name in PRELOAD:
        importlib.import_module(name)
    results = {}
    for state in ("plain", "tensorflow", "frozen"):
        if state == "tensorflow":
            from study.deps import quiet_stderr, without_keras_extras

            with quiet_stderr(), without_keras_extras():
                import tensorflow  # noqa: F401
        if state == "frozen":
            gc.collect()
            gc.freeze()
        runs = [child_exit() for _ in range(args.rounds)]
        cpu = statistics.median(c for c, _ in runs)
        faults = statistics.median(f for _, f in runs)
        results[state] = {"cpu": cpu, "minor_faults": faults, "runs": runs}
        print(f"{state:10} {cpu:5.2f} CPU-s  {faults:8.0f} minor faults")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rounds": args.rounds, "states": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
