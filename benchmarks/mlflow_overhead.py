"""MLflow's cost: the same study with MLflow logging and with a tracker that drops everything.

Both runs propose and train the same trials (seeded samplers, step-based pruning), so the
difference in summed trial wall time is what logging costs the trials; the logging thread's own
CPU time is reported too. Usage: python benchmarks/mlflow_overhead.py [--file STUDY.yaml]
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

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: {} if name == "trial_runs" else None


def run(file: Path, track: bool) -> tuple[float, int, float]:
    from study.config.studyfile import load_study_file
    from study.runner.engine import RunOptions, StudyEngine

    class Engine(StudyEngine):
        def _setup_tracking(self) -> None:
            if track:
                super()._setup_tracking()
            else:
                self.tracker = NullTracker()

    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="study-mlflow-") as work:
        os.chdir(work)
        try:
            engine = Engine(load_study_file(file), RunOptions(tuner="optuna", live=False))
            engine.run()
        finally:
            os.chdir(cwd)
    return sum(engine._trial_seconds), len(engine._trial_seconds), engine.tracker.cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(ROOT / "search_spaces" / "quickstart.yaml"))
    args = parser.parse_args()
    file = Path(args.file).resolve()
    without, n, _ = run(file, track=False)
    with_mlflow, n2, cpu = run(file, track=True)
    print(f"\n{n} trials without MLflow: {without:.2f} s of trial wall time")
    print(f"{n2} trials with MLflow:    {with_mlflow:.2f} s; logging thread CPU {cpu:.2f} s")
    print(f"added trial wall time: {100 * (with_mlflow - without) / without:+.1f}%")
    print(f"logging CPU / trial wall time: {100 * cpu / with_mlflow:.1f}%")
    print(
        f"per trial: {1000 * cpu / n2:.0f} ms of logging CPU, {with_mlflow / n2:.2f} s of training"
    )


if __name__ == "__main__":
    main()
