"""Where the quickstart's trial wall time goes: training against everything else.

Runs the quickstart study as the README does (``study run search_spaces/quickstart.yaml``, in a
subprocess, with a fresh store under a temporary directory), then reads every trial back from
the ledger and prints, per trial and in total: wall time (handing the trial to a worker to
recording it), training seconds (the timed compiled calls), overhead = wall - training, and
each part of `study.results.TIMING_PARTS` the trial measured ("-" if none did). Means are per
trial; the first trial may also start the TensorFlow worker (and traces first), so the overhead
of the others is printed apart, and so is that of trials that reused the previous trial's
compiled functions (``reused`` in their environment) and of those that did not. End to end is the whole ``study run`` process (Python and TensorFlow start-up, worker
start, proposals and claims between trials included).

The ledger's wall time stops just before the ledger write (a record cannot hold its own
writing time); MLflow's copy (``timing/wall_seconds``) also counts that write and the tuner's
report, and its mean is printed when the trial runs have it.

Usage: python benchmarks/trial_overhead.py [--file STUDY.yaml] [--workdir DIR] [--quiet]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from pathlib import Path

from study_bench import run_study

ROOT = Path(__file__).resolve().parent.parent


def ledger_trials(workdir: Path, name: str) -> list:
    """The study's finished trials (those with a result), in the order they started."""
    from study.ledger import Ledger

    ledger = Ledger.open(str(workdir / "mlruns" / "optuna.journal"), name, create=False)
    trials = [t for s in ledger.strata() for t in ledger.trials(s) if t.result is not None]
    return sorted(trials, key=lambda t: t.started_at or math.inf)


def mlflow_walls(workdir: Path, name: str) -> dict[str, float]:
    """``timing/wall_seconds`` of every trial run that has it, by run name (``b8/default#0``)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return {}
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    key = "timing/wall_seconds"
    return {r.info.run_name: r.data.metrics[key] for r in runs if key in r.data.metrics}


def fmt(value: float | None, width: int = 9) -> str:
    return (
        f"{'-':>{width}}" if value is None or not math.isfinite(value) else f"{value:>{width}.3f}"
    )


def report(trials: list, end_to_end: float, walls_mlflow: dict[str, float]) -> None:
    from study.results import TIMING_PARTS, WALL

    parts = [p for p in TIMING_PARTS if p != "train"]
    head = f"{'trial':<18}{'status':<12}{'wall':>9}{'train':>9}{'overhead':>9}"
    print(head + "".join(f"{p:>12}" for p in parts) + f"{'reused':>8}")
    rows = []
    for t in trials:
        result = t.result
        wall = result.timings.get(WALL)
        train = result.timings.get("train", result.train_seconds)
        overhead = None if wall is None else wall - train
        rows.append((wall, train, overhead, {p: result.timings.get(p) for p in parts}))
        reused = result.environment.get("reused", "-")
        print(
            f"{f'{t.stratum}#{t.number}':<18}{t.status.value:<12}{fmt(wall)}{fmt(train)}"
            f"{fmt(overhead)}" + "".join(fmt(rows[-1][3][p], 12) for p in parts) + f"{reused!s:>8}"
        )
    timed = [r for r in rows if r[0] is not None]
    n = len(timed)
    if not n:
        print("no trial has a wall time (the engine predates timings)")
        return
    wall, train = sum(r[0] for r in timed), sum(r[1] for r in timed)
    print(f"\n{n} trials: wall {wall:.2f} s, training {train:.2f} s, overhead {wall - train:.2f} s")
    print(
        f"per trial (mean): wall {wall / n:.3f} s, training {train / n:.3f} s, "
        f"overhead {(wall - train) / n:.3f} s; training is {100 * train / wall:.1f}% of wall"
    )
    means = []
    for p in parts:
        seen = [r[3][p] for r in timed if r[3][p] is not None]
        means.append(f"{p} {statistics.fmean(seen):.3f}" if seen else f"{p} -")
    print("mean seconds per trial of each part: " + ", ".join(means))
    recording = [
        walls_mlflow[f"{t.stratum}#{t.number}"] - t.result.timings[WALL]
        for t in trials
        if f"{t.stratum}#{t.number}" in walls_mlflow and WALL in t.result.timings
    ]
    if recording:
        print(
            f"recording (ledger write and tuner report: MLflow's wall - the ledger's): mean "
            f"{statistics.fmean(recording):.3f} s per trial over {len(recording)} trials"
        )
    first, rest = timed[0], timed[1:]
    if rest:
        overhead = sum(r[2] for r in rest) / len(rest)
        print(
            f"the first trial (it may start the worker and traces first): wall {first[0]:.3f} s; "
            f"the other {len(rest)} trials: overhead {overhead:.3f} s per trial"
        )
    for reused in (True, False):
        group = [r for r, t in zip(rows, trials) if t.result.environment.get("reused") is reused]
        group = [r for r in group if r[0] is not None]
        if group:
            mean = sum(r[2] for r in group) / len(group)
            print(f"trials with reused={reused}: {len(group)}, overhead {mean:.3f} s per trial")
    print(f"end to end (`study run` process): {end_to_end:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(ROOT / "search_spaces" / "quickstart.yaml"))
    parser.add_argument("--workdir", help="where mlruns/ goes (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true", help="hide the study's own output")
    args = parser.parse_args()
    file = Path(args.file).resolve()
    from study.config.studyfile import load_study_file

    name = load_study_file(file).name
    with tempfile.TemporaryDirectory(prefix="study-overhead-") as tmp:
        workdir = Path(args.workdir).resolve() if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        end_to_end = run_study(file, workdir, quiet=args.quiet)[1]
        report(ledger_trials(workdir, name), end_to_end, mlflow_walls(workdir, name))


if __name__ == "__main__":
    main()
