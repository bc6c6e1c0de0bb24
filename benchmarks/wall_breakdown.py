"""Where a study's wall time goes: start-up, trials, decisions, fits, MLflow, the closing answer.

Runs each study file as a user does (``study run FILE --workers N``, in a process of its own with
a fresh store, ``STUDY_LOG=debug``) and reads the run's own breakdown (`study.phases`, the
``wall breakdown:`` line) against the process's wall time:

- **start-up**: the process starting until the first trial is handed to a trainer worker
  (imports, the preflight's worker start, the ledger, MLflow's experiment and parent run);
- **trials**: the worker threads' seconds inside trials (summed over workers: with 2 workers it
  may exceed the wall time between the first trial and the engine's end);
- **decisions**: the worker threads' seconds between trials (claims, allocation rounds,
  proposals, recording), **fits** the model's fits for decisions (with ``tuner.fit_ahead``
  made in a background thread: `study.tuners.fit_ahead`), how many fits were made and kept (a
  fit to the same trials reused), and **fit waits** the worker threads' seconds waiting for a
  background fit still running (then the fits' part of decisions);
- **closing**: the engine's end until the process exits (the closing fit and its answer line,
  MLflow's queue, the exit); **answer** the closing fit and answer among it;
- **MLflow**: its background thread's wall and CPU seconds, and its CPU as a share of the
  trials' seconds.

Defaults: the quickstart (`study/examples/quickstart.yaml`) and the MNIST-1D MLP question
(`benchmarks/mnist1d_compute.yaml`), each with ``--workers 1`` and ``2``. Writes
``results/wall_breakdown.json`` (one row per run, with the machine's load average) and prints a
Markdown table.

Usage: python benchmarks/wall_breakdown.py [--files F ...] [--workers 1 2] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from study_bench import run_study

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FILES = (ROOT / "study" / "examples" / "quickstart.yaml", HERE / "mnist1d_compute.yaml")
LINE = re.compile(r"wall breakdown: (\{.*\})")
MLFLOW = re.compile(r"MLflow logging \(background thread\): .* of ([0-9.]+) s of trials")


def breakdown(file: Path, workers: int) -> dict[str, Any]:
    """One run of ``file`` with ``workers`` workers: its phases (see the module)."""
    os.environ["STUDY_LOG"] = "debug"  # the run's own breakdown, on its stderr
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="study-wall-") as work:
        started = time.time()
        done, wall = run_study(file, Path(work), "--workers", str(workers))
        ended = started + wall
    found = LINE.search(done.stderr or "")
    if found is None:
        raise SystemExit(f"{file.name}: no 'wall breakdown' line in the run's output")
    shot = json.loads(found.group(1))
    seconds, counts, marks = shot["seconds"], shot["counts"], shot["marks"]
    trials = seconds.get("trials", 0.0)
    cpu = shot["mlflow"]["cpu"]
    steps = re.findall(r"(?:reached at|pruned at) step (\d+)", done.stdout or "")
    return {
        "file": file.name,
        "workers": workers,
        "load": round(load, 2),
        "wall": wall,
        "startup": marks.get("first_trial", ended) - started,
        "trials": trials,
        "trial_count": int(counts.get("trials", 0)),
        "decisions": seconds.get("decisions", 0.0),
        "fits": seconds.get("fits", 0.0),
        "fit_wait": seconds.get("fit_wait", 0.0),
        "fit_count": int(counts.get("fits", 0)),
        "fits_kept": int(counts.get("fits_kept", 0)),
        "closing": ended - marks.get("engine_end", ended),
        "answer": seconds.get("answer", 0.0),
        "mlflow_busy": shot["mlflow"]["busy"],
        "mlflow_cpu": cpu,
        "mlflow_share": cpu / trials if trials else float("nan"),
        "steps_seen": sum(int(s) for s in steps),
        "answer_line": next(
            (line.strip() for line in (done.stdout or "").splitlines() if "B_noise" in line), ""
        ),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| study | workers | load | wall | start-up | trials (n) | decisions | fits (made/kept) "
        "| fit waits "
        "| closing (answer) | MLflow wall / CPU (CPU / trials) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['workers']} | {r['load']:.1f} | {r['wall']:.1f} s | "
            f"{r['startup']:.1f} s | {r['trials']:.1f} s ({r['trial_count']}) | "
            f"{r['decisions']:.1f} s | {r['fits']:.1f} s ({r['fit_count']}/{r['fits_kept']}) | "
            f"{r.get('fit_wait', 0.0):.1f} s | "
            f"{r['closing']:.1f} s ({r['answer']:.1f} s) | {r['mlflow_busy']:.1f} / "
            f"{r['mlflow_cpu']:.2f} s ({100 * r['mlflow_share']:.1f}%) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", type=Path, default=list(FILES))
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "wall_breakdown.json")
    args = parser.parse_args()
    rows = []
    for _ in range(args.repeats):
        for file in args.files:
            for workers in args.workers:  # back to back: the same load for each pair
                rows.append(breakdown(file.resolve(), workers))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    print()
    print(table(rows))


if __name__ == "__main__":
    main()
