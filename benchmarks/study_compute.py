"""Study compute: the project's search against a naive grid baseline (MNIST-1D MLP).

Baseline: every batch size x the same learning-rate grid, each trial trained to the full step
budget (no early stop, no pruning); its steps to target are read off the full curves afterwards
(the same evaluation cadence). Ours: `study run` on benchmarks/mnist1d_compute.yaml (Optuna +
KerasTuner, pruning, learning-rate transfer between batch sizes).

Prints both totals of training steps, per batch size steps to target of both, the largest
relative difference, the end-to-end wall time of each, and where our trials' time went (the
ledger's per-trial timings: build, trace, train, evaluate, bookkeeping, wall).
Usage: python benchmarks/study_compute.py [--grid 8] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def run_baseline(config, grid: int) -> tuple[int, dict[int, float], dict[int, float]]:
    """Train every (batch size, lr) of the grid to the full budget; return steps and results."""
    from study.config.space import Stratum
    from study.config.target import Target
    from study.runner.pool import WorkerPool

    low = config.space.param("learning_rate").low
    high = config.space.param("learning_rate").high
    rates = [float(x) for x in np.geomspace(low, high, grid)]
    never = Target.parse("val_accuracy>=2")
    total = 0
    best: dict[int, float] = {}
    best_lr: dict[int, float] = {}
    with WorkerPool(1) as pool:
        for batch in config.space.batch_sizes:
            best[batch] = math.inf
            for lr in rates:
                spec = config.trial_spec(Stratum(batch, "default"), {"learning_rate": lr})
                spec = dataclasses.replace(spec, target=never)
                result = pool.run(spec)
                total += result.steps_run
                for m in result.curve:
                    if config.target.met_by(m.metrics):
                        if m.step < best[batch]:
                            best[batch], best_lr[batch] = float(m.step), lr
                        break
            print(
                f"  baseline b{batch}: best {best[batch]:.0f} steps (lr {best_lr.get(batch, math.nan):.3g})",
                flush=True,
            )
    return total, best, best_lr


def run_ours(config) -> tuple[int, dict[int, float], dict[str, float]]:
    """`study run` (both tuners) in the current directory's store; totals read off the ledger."""
    from study.ledger import Ledger
    from study.paths import journal_path
    from study.runner.launch import RunOptions, run_study

    status = run_study(config, RunOptions(tuner="both", live=False))
    if status != 0:
        raise SystemExit(f"study run exited with {status}")
    ledger = Ledger.open(str(journal_path()), config.name, create=False)
    total = 0
    best: dict[int, float] = {}
    parts: dict[str, float] = {}
    for stratum in config.strata:
        trials = ledger.counted(stratum)
        total += sum(t.result.steps_run for t in trials if t.result is not None)
        winner = ledger.best(stratum)
        steps = winner.result.steps_to_target if winner and winner.result else None
        best[stratum.batch_size] = float(steps) if steps is not None else math.inf
        for t in trials:
            for part, seconds in (t.result.timings if t.result else {}).items():
                parts[part] = parts.get(part, 0.0) + seconds
    return total, best, parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=8, help="learning rates in the baseline grid")
    parser.add_argument("--workdir", help="where mlruns/ goes (default: a temporary directory)")
    args = parser.parse_args()
    from study.config.study import Allocation
    from study.config.studyfile import load_study_file

    # 8 trials per batch size, as the baseline's 8 rates (the file states a budget of steps).
    config = dataclasses.replace(
        load_study_file(HERE / "mnist1d_compute.yaml"), allocation=Allocation()
    )
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="study-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(workdir)
    start = time.time()
    ours_total, ours_best, parts = run_ours(config)
    ours_time = time.time() - start
    start = time.time()
    base_total, base_best, base_lr = run_baseline(config, args.grid)
    base_time = time.time() - start
    print("\nbatch  baseline (lr)        ours  rel.diff")
    worst = 0.0
    for batch in config.space.batch_sizes:
        b, o = base_best[batch], ours_best[batch]
        diff = abs(o - b) / b if math.isfinite(b) and math.isfinite(o) else math.inf
        worst = max(worst, diff if math.isfinite(b) else 0.0)
        print(f"{batch:>5}{b:>10.0f} ({base_lr.get(batch, math.nan):<8.3g}){o:>8.0f}{diff:>10.1%}")
    summary = {
        "baseline_steps": base_total,
        "ours_steps": ours_total,
        "ratio": ours_total / base_total,
        "largest_relative_difference": worst,
        "baseline_seconds": round(base_time, 1),
        "ours_seconds": round(ours_time, 1),
        "ours_trial_seconds": {k: round(v, 2) for k, v in sorted(parts.items())},
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
