"""Coverage of the answers' intervals, by simulation: does each 95% interval the report prints
for the model of every trial hold the truth 95% of the time?

Each condition is a study design like the default study file's (7 batch sizes, 8 trials each, a
random learning-rate search around a guess), with trial noise, the jagged learning-rate
response a fixed training seed shows (``jagged``: the trials draw their own seeds), for the
Adam-like condition a best learning rate that bends, and for the last an S(B) whose knee is
sharper than McCandlish et al.'s (as on the MNIST-1D MLP question). Each synthetic study is fitted with
`fit_surrogate` on all its trials and read with `scaling_answers` (`sim.answer_coverage`).
Prints, per condition and answer, the share of intervals that held the truth, its Monte Carlo
standard error and, for the batch-size answers, how often the estimate was the true batch size.

Usage: python benchmarks/answer_coverage.py [--studies 300] [--workers 2] [--seed 0]
    [--conditions A B C D]
"""

from __future__ import annotations

import os

# One BLAS thread per worker: the fits are many small problems, and L-BFGS-B's BLAS calls on
# several threads per process ran ~5x slower on a shared 2-core machine.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import pandas as pd  # noqa: E402
from sim.answer_coverage import ANSWERS, answer_coverage  # noqa: E402
from sim.simulate import StudyDesign  # noqa: E402

SIZES = (16, 32, 64, 128, 256, 512, 1024)
CONDITIONS: dict[str, StudyDesign] = {
    "A: noise 0.10, jagged 0.15": StudyDesign(
        batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15
    ),
    "B: noise 0.20, jagged 0.15, grid 1.10": StudyDesign(
        batch_sizes=SIZES, trials_per_batch=8, noise=0.20, jagged=0.15, eval_ratio=1.10
    ),
    "C: bends (-0.15), noise 0.10, jagged 0.15": StudyDesign(
        batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15, bend=-0.15
    ),
    "D: sharper knee (q = 3), noise 0.10, jagged 0.15": StudyDesign(
        batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15, knee=3.0
    ),
}


def run(args: tuple[str, StudyDesign, int, int]) -> pd.DataFrame:
    name, design, studies, seed = args
    return answer_coverage(design, studies, seed=seed).assign(condition=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=300, help="studies per condition")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--conditions", nargs="+", choices=[n.split(":")[0] for n in CONDITIONS], default=None
    )
    args = parser.parse_args()
    if args.studies < 1:
        parser.error(f"--studies must be >= 1 (got {args.studies})")
    start = time.perf_counter()
    chosen = {
        n: d
        for n, d in CONDITIONS.items()
        if args.conditions is None or n.split(":")[0] in args.conditions
    }
    # Each condition keeps its own seed (its place in CONDITIONS) whichever are run.
    jobs = [
        (n, d, args.studies, args.seed + i)
        for i, (n, d) in enumerate(CONDITIONS.items())
        if n in chosen
    ]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        tables = list(pool.map(run, jobs))
    elapsed = time.perf_counter() - start
    short = [name.split(":")[0] for name in chosen]
    print("Coverage of the 95% intervals (Monte Carlo se); batch sizes: share exact in brackets\n")
    print("| answer | " + " | ".join(short) + " |")
    print("|---|" + "---|" * len(short))
    for answer in ANSWERS:
        cells = []
        for table in tables:
            row = table[table["answer"] == answer].iloc[0]
            cell = f"{100 * row['coverage']:.1f}% ({100 * row['se']:.1f})"
            if answer in ("perfect_end", "max_parallel_start", "recommended_batch"):
                cell += f" [{100 * row['exact']:.0f}% exact]"
            cells.append(cell)
        print(f"| {answer} | " + " | ".join(cells) + " |")
    for name in chosen:
        print(f"\n{name}")
    print(f"\n{args.studies} studies per condition, {elapsed:.0f} s with {args.workers} workers")


if __name__ == "__main__":
    main()
