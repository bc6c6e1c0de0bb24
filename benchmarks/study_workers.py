"""Trials per hour with `--workers 1` against `--workers 2` on the same small study.

Usage: python benchmarks/study_workers.py [--file search_spaces/quickstart.yaml]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(file: Path, workers: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="study-workers-") as cwd:
        start = time.time()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "study",
                "run",
                str(file),
                "--workers",
                str(workers),
                "--tuner",
                "optuna",
            ],
            cwd=cwd,
            check=True,
            capture_output=True,
        )
        seconds = time.time() - start
        out = subprocess.run(
            [sys.executable, "-m", "study", "ls", "--json"],
            cwd=cwd,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    import json

    trials = sum(row["trials_done"] for row in json.loads(out))
    return seconds, trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(ROOT / "search_spaces" / "quickstart.yaml"))
    args = parser.parse_args()
    rows = []
    for workers in (1, 2):
        seconds, trials = run(Path(args.file), workers)
        rows.append((workers, seconds, trials, 3600 * trials / seconds))
        print(
            f"--workers {workers}: {trials} trials in {seconds:.1f} s = {3600 * trials / seconds:.0f} trials/hour",
            flush=True,
        )
    print(f"speed-up of --workers 2: {rows[1][3] / rows[0][3]:.2f}x")


if __name__ == "__main__":
    main()
