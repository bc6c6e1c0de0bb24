"""MLflow's CPU per trial, measured by replaying a finished study's trials into a fresh store.

A study run with ``--workers 1`` hands MLflow, per trial, a run to open (`start_trial`), a
finished trial to log (`finish_trial`: params, tags, every metric point, the dataset, the
status) and, with allocation by steps, the allocation's state (``allocation.json``). This
replays the same calls, with the trials a study recorded in its ledger (their curves, params,
tags and data as they were), into a new SQLite MLflow store, without training: the tracker's
background thread's CPU seconds divided by the trials is what MLflow costs a trial. Set-up
(experiment, parent run, repair) runs on the main thread in a real run and is not counted.

With ``--profile FILE`` the background thread's calls are profiled (cProfile; the top
functions by cumulative time are printed and the stats saved to FILE). ``--repeat N`` replays
N times (a fresh store each) and reports each. Each trial takes its recorded wall time and
``--gap`` seconds (default 0.6: the MNIST-1D question's decisions) pass between trials, as in
the run; ``--speed 2`` replays twice as fast (``0``: no waits, every trial in one batch). The
study comes from a store a run left, e.g.
``cd /tmp/x && study run benchmarks/mnist1d_compute.yaml --workers 1`` leaves ``/tmp/x/mlruns``.

Usage: python benchmarks/mlflow_replay.py --file benchmarks/mnist1d_compute.yaml --home
/tmp/x/mlruns [--repeat 3] [--speed 1] [--gap 0.6] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def recorded(file: Path, home: Path) -> tuple[Any, list[Any], Any]:
    """The study's config, its finished trials (in the order they started) and the stored
    allocation state (None without one)."""
    from study.config.studyfile import load_study_file
    from study.ledger import Ledger

    config = load_study_file(file)
    ledger = Ledger.open(str(home / "optuna.journal"), config.name, create=False)
    trials = [t for s in ledger.strata() for t in ledger.trials(s) if t.result is not None]
    trials.sort(key=lambda t: (t.result.timings.get("start", 0.0), str(t.stratum), t.number))
    return config, trials, ledger.notes.allocation()


def replay(
    config: Any,
    trials: list[Any],
    allocation: Any,
    profile: cProfile.Profile | None,
    speed: float,
    gap: float,
) -> dict:
    """Log ``trials`` as a one-worker run does into a fresh store, each trial taking its
    recorded wall time and ``gap`` seconds between trials, divided by ``speed`` (0: no waits);
    the tracker thread's CPU and busy seconds."""
    from study.ext.allocation.rounds import log_allocation
    from study.tracking.study_tracker import StudyTracker

    with tempfile.TemporaryDirectory(prefix="mlflow-replay-") as work:
        db = Path(work) / "mlflow.db"
        tracker = StudyTracker(f"sqlite:///{db}", config.name)
        tracker.ensure_parent({"study": config.name}, {}, note="replay")
        tracker.flush()
        if profile is not None:
            submit = tracker.submit
            tracker.submit = lambda job, key=None: submit(  # type: ignore[method-assign]
                lambda: profile.runcall(job), key
            )
        cpu0, busy0 = tracker.cpu_seconds, tracker.busy_seconds
        start = time.perf_counter()
        for trial in trials:
            spec = config.trial_spec(trial.stratum, trial.params, number=trial.number)
            tracker.start_trial(trial)
            _wait(trial.result.timings.get("wall", 0.0), speed)
            tracker.finish_trial(trial, spec, trial.result)
            if allocation is not None:
                log_allocation(tracker, allocation)
            _wait(gap, speed)
        tracker.describe_answer("replayed")
        tracker.end_parent("FINISHED", {"trials_done": float(len(trials))})
        tracker.close(30.0)
        wall = time.perf_counter() - start
        return {
            "trials": len(trials),
            "cpu": tracker.cpu_seconds - cpu0,
            "busy": tracker.busy_seconds - busy0,
            "wall": wall,
            "errors": tracker.errors,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=ROOT / "benchmarks" / "mnist1d_compute.yaml")
    parser.add_argument("--home", type=Path, required=True, help="the study's store (mlruns/)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument(
        "--speed", type=float, default=1.0, help="replay this many times faster (0: no waits)"
    )
    parser.add_argument(
        "--gap", type=float, default=0.6, help="seconds between trials (decisions) in the run"
    )
    args = parser.parse_args()
    config, trials, allocation = recorded(args.file, args.home)
    points = sum(len(t.result.curve) for t in trials)
    print(f"{len(trials)} trials, {points} evaluations; load {_load()}")
    for _ in range(args.repeat):
        profile = cProfile.Profile(time.thread_time) if args.profile else None
        row = replay(config, trials, allocation, profile, args.speed, args.gap)
        print(
            f"MLflow thread: {row['cpu']:.2f} CPU-s, {row['busy']:.2f} s busy for {row['trials']} "
            f"trials: {1000 * row['cpu'] / row['trials']:.1f} CPU-ms per trial"
            + (f"; errors {row['errors']}" if row["errors"] else "")
        )
        if profile is not None:
            profile.dump_stats(args.profile)
            pstats.Stats(profile).sort_stats("cumulative").print_stats(45)
    print(f"threads left: {threading.active_count()}; load {_load()}")


def _wait(seconds: float, speed: float) -> None:
    if speed > 0:
        time.sleep(seconds / speed)


def _load() -> str:
    with open("/proc/loadavg") as handle:
        return handle.read().split()[0]


if __name__ == "__main__":
    main()
