"""Interval coverage: how often the fits' 95% intervals hold the truth, by simulation.

Each condition is a study design (batch sizes, trials per batch size, trial noise, evaluation
grid); each of ``--studies`` synthetic studies draws a truth (S_min, B_noise inside the
measured range, alpha, the best learning rate), simulates its trials (`sim.simulate`)
and runs the analysis a report runs (`sim.coverage`). Prints, per condition and
parameter, the share of intervals that held the truth, its Monte Carlo standard error, the
median interval width and the share of one-sided intervals.

Usage: python benchmarks/interval_coverage.py [--studies 2000] [--workers 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import pandas as pd
from sim.coverage import PARAMETERS, coverage
from sim.simulate import StudyDesign

POWERS = tuple(2**k for k in range(3, 15))  # 8 ... 16384

CONDITIONS: dict[str, StudyDesign] = {
    "A: 5 sizes x4 apart, 6 trials, noise 0.10, grid 1.10": StudyDesign(
        batch_sizes=(8, 32, 128, 512, 2048), trials_per_batch=6, noise=0.10, eval_ratio=1.10
    ),
    "B: 6 sizes, 4 trials, noise 0.15, grid 1.10": StudyDesign(
        batch_sizes=POWERS[:6], trials_per_batch=4, noise=0.15, eval_ratio=1.10
    ),
    "C: 10 sizes (8-4096), 8 trials, noise 0.10, grid 1.05": StudyDesign(
        batch_sizes=POWERS[:10], trials_per_batch=8, noise=0.10, eval_ratio=1.05
    ),
    "D: 12 sizes, 16 trials, noise 0.10, grid 1.05": StudyDesign(
        batch_sizes=POWERS, trials_per_batch=16, noise=0.10, eval_ratio=1.05
    ),
    "E: 8 sizes, 8 trials, noise 0.25, grid 1.10": StudyDesign(
        batch_sizes=POWERS[1:9], trials_per_batch=8, noise=0.25, eval_ratio=1.10
    ),
    "F: 7 sizes, 12 trials, noise 0.05, grid 1.10": StudyDesign(
        batch_sizes=POWERS[:7], trials_per_batch=12, noise=0.05, eval_ratio=1.10
    ),
}


def run(args: tuple[str, StudyDesign, int, int]) -> pd.DataFrame:
    name, design, studies, seed = args
    table = coverage(design, studies, seed=seed)
    return table.assign(condition=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=2000, help="studies per condition")
    parser.add_argument("--workers", type=int, default=2, help="processes (default: 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.studies < 1:
        parser.error(f"--studies must be >= 1 (got {args.studies})")

    start = time.perf_counter()
    jobs = [
        (name, design, args.studies, args.seed + i)
        for i, (name, design) in enumerate(CONDITIONS.items())
    ]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        tables = list(pool.map(run, jobs))
    elapsed = time.perf_counter() - start

    for name, table in zip(CONDITIONS, tables):
        design = CONDITIONS[name]
        print(f"\n{name}")
        print(
            f"  lr search: {design.trials_per_batch} random rates within "
            f"+-{design.lr_window:g} decades of a guess off by N(0, {design.lr_centre_error:g}) "
            f"decades; best-of-N factor {table['best_of_n_factor'].iloc[0]:.3f}"
        )
        print(
            f"  {'parameter':<30} {'studies':>7} {'coverage':>9} {'(se)':>6} "
            f"{'median width':>13} {'one-sided':>9}"
        )
        for row in table.itertuples(index=False):
            width = (
                f"{row.median_width:.2f}"
                if row.parameter.startswith("alpha")
                else f"x{row.median_width:.2f}"
            )
            print(
                f"  {row.parameter:<30} {row.studies:>7} {100 * row.coverage:>8.1f}% "
                f"{100 * row.se:>5.1f} {width:>13} {100 * row.on_edge:>8.1f}%"
            )

    short = [name.split(":")[0] for name in CONDITIONS]
    print("\nCoverage of the 95% intervals (median width: high/low; for alpha high - low)\n")
    print("| parameter | " + " | ".join(short) + " |")
    print("|---|" + "---|" * len(short))
    for parameter in PARAMETERS:
        cells = []
        for table in tables:
            row = table[table["parameter"] == parameter].iloc[0]
            width = (
                f"{row['median_width']:.2f}"
                if parameter.startswith("alpha")
                else f"x{row['median_width']:.2f}"
            )
            cells.append(f"{100 * row['coverage']:.1f}% ({width})")
        print(f"| {parameter} | " + " | ".join(cells) + " |")
    print(f"\n{args.studies} studies per condition, {elapsed:.0f} s with {args.workers} workers")


if __name__ == "__main__":
    main()
