"""MLflow's cost: the same study with MLflow logging and with a tracker that drops everything.

Both runs propose and train the same trials (seeded samplers, step-based pruning), so the
difference in summed trial wall time (the ledger's timings) is what logging costs the trials,
and the difference in the study process's CPU time is what MLflow costs in all. Usage: python benchmarks/mlflow_overhead.py [--file STUDY.yaml]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class NullTracker:
    """Accepts every call of `StudyTracker` and does nothing."""

    busy_seconds = cpu_seconds = 0.0
    experiment_id = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def run(file: Path, track: bool) -> tuple[float, int, float]:
    """Run the study in a temporary store, with or without MLflow; return the trials' wall
    seconds (the ledger's timings), the number of trials and the study process's CPU seconds."""
    import time

    from study.config.studyfile import load_study_file
    from study.ledger import Ledger
    from study.paths import journal_path
    from study.runner import launch
    from study.runner.launch import RunOptions, run_study

    cwd = os.getcwd()
    tracker = launch.StudyTracker
    with tempfile.TemporaryDirectory(prefix="study-mlflow-") as work:
        os.chdir(work)
        if not track:
            launch.StudyTracker = NullTracker  # type: ignore[misc, assignment]
        try:
            config = load_study_file(file)
            cpu = time.process_time()
            run_study(config, RunOptions(tuner="optuna", live=False))
            cpu = time.process_time() - cpu
            ledger = Ledger.open(str(journal_path()), config.name, create=False)
            walls = [
                t.result.timings.get("wall", 0.0)
                for s in config.strata
                for t in ledger.counted(s)
                if t.result is not None
            ]
        finally:
            launch.StudyTracker = tracker  # type: ignore[misc]
            os.chdir(cwd)
    return sum(walls), len(walls), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(ROOT / "search_spaces" / "quickstart.yaml"))
    args = parser.parse_args()
    file = Path(args.file).resolve()
    without, n, cpu_without = run(file, track=False)
    with_mlflow, n2, cpu_with = run(file, track=True)
    cpu = max(0.0, cpu_with - cpu_without)
    print(f"\n{n} trials without MLflow: {without:.2f} s of trial wall time")
    print(f"{n2} trials with MLflow:    {with_mlflow:.2f} s; study process CPU +{cpu:.2f} s")
    print(f"added trial wall time: {100 * (with_mlflow - without) / without:+.1f}%")
    print(f"MLflow's CPU / trial wall time: {100 * cpu / with_mlflow:.1f}%")
    print(f"per trial: {1000 * cpu / n2:.0f} ms of MLflow CPU, {with_mlflow / n2:.2f} s of wall")


if __name__ == "__main__":
    main()
