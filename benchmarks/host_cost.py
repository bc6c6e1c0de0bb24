"""What a small `study run` costs in CPU, per process: the host, its forkserver (the one
TensorFlow import), the processes forked from it (trainer workers and KerasTuner's oracle) and
any other (multiprocessing's resource tracker).

Runs ``study run`` on the runner tests' tiny study (tabular MLP, two batch sizes, ``--trials``
trials each) in a fresh store, ``--rounds`` times per tuner choice, and samples
``/proc/<pid>/stat`` of the host and its descendants every 20 ms; a process's CPU is the last
sample of its user + system time. Also notes whether the host imported TensorFlow (a host
proposing for KerasTuner did, before its oracle moved to `study.runner.oracle_process`).
Prints the median CPU-seconds per role and tuner, and writes them to
``benchmarks/results/host_cost.json``.

Usage: python benchmarks/host_cost.py [--trials 3] [--rounds 3] [--tuners both optuna]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.runner.conftest import tiny_study, write_study  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "host_cost.json"
TICK = os.sysconf("SC_CLK_TCK")
HOST = """\
import sys
from study.cli import main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    print("tensorflow-in-host", "tensorflow" in sys.modules, file=sys.stderr)
    raise SystemExit(code)
"""


def study_file(directory: Path, trials: int) -> Path:
    """The runner tests' tiny study (`tests.runner.conftest.TINY`), ``trials`` per stratum."""
    data = tiny_study(name="host-cost", trials_per_stratum=trials)
    return write_study(directory, data)


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def run_once(tuner: str, trials: int) -> dict[str, float | bool]:
    """One ``study run`` in a fresh directory: CPU-seconds per role."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "host.py").write_text(HOST, encoding="utf-8")
        path = study_file(directory, trials)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "STUDY_HOME": str(directory / "mlruns")}
        host = subprocess.Popen(
            [sys.executable, "host.py", "run", str(path), "--tuner", tuner],
            cwd=directory,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        parents: dict[str, int] = {}
        cpu: dict[str, float] = {}
        while host.poll() is None:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                seen = _stat(pid)
                if seen is None:
                    continue
                parent, seconds = seen
                if pid in parents or str(parent) in parents or int(pid) == host.pid:
                    parents.setdefault(pid, parent)  # not init's, once the server ended
                    cpu[pid] = seconds
            time.sleep(0.02)
        stderr = host.stderr.read() if host.stderr else ""
        if host.returncode != 0:
            raise SystemExit(f"study run exited {host.returncode}: {stderr[-2000:]}")
    root = str(host.pid)
    # The forkserver: the host's child that has children (the resource tracker has none).
    children = {str(parent) for parent in parents.values()}
    servers = [p for p, parent in parents.items() if str(parent) == root and p in children]
    forked = [p for p, parent in parents.items() if str(parent) in servers]
    others = set(cpu) - {root, *servers, *forked}
    return {
        "host": cpu.get(root, 0.0),
        "forkserver": sum(cpu[p] for p in servers),
        "forked": sum(cpu[p] for p in forked),
        "other": sum(cpu[p] for p in others),
        "total": sum(cpu.values()),
        "tensorflow_in_host": "tensorflow-in-host True" in stderr,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tuners", nargs="+", default=["both", "optuna"])
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    runs: dict[str, list[dict[str, float | bool]]] = {t: [] for t in args.tuners}
    for _ in range(args.rounds):
        for tuner in args.tuners:  # interleaved: a slow minute hits both
            runs[tuner].append(run_once(tuner, args.trials))
    print(f"CPU-seconds of a `study run` of {2 * args.trials} trials, median of {args.rounds}")
    print(
        f"{'tuner':8} {'host':>6} {'forksrv':>8} {'forked':>7} {'other':>6} {'total':>6}  TF in host"
    )
    for tuner, rows in runs.items():
        median = {
            k: statistics.median(float(r[k]) for r in rows)
            for k in ("host", "forkserver", "forked", "other", "total")
        }
        imported = any(bool(r["tensorflow_in_host"]) for r in rows)
        results[tuner] = {**median, "tensorflow_in_host": imported, "runs": rows}
        print(
            f"{tuner:8} {median['host']:6.2f} {median['forkserver']:8.2f} "
            f"{median['forked']:7.2f} {median['other']:6.2f} {median['total']:6.2f}  {imported}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"trials": 2 * args.trials, "tuners": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
