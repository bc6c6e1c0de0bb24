"""Coverage of the answers' intervals, by simulation: does each 95% interval the report prints
for the model of every trial hold the truth 95% of the time?

Each condition is a study design like the default study file's (7 batch sizes, 8 trials each, a
random learning-rate search around a guess), with trial noise, the jagged learning-rate
response a fixed training seed shows (``jagged``: the trials draw their own seeds), for the
Adam-like condition a best learning rate that bends, and for the last an S(B) whose knee is
sharper than McCandlish et al.'s (as on the MNIST-1D MLP question). Conditions Q, Q1 and R are
the quickstart's size (`search_spaces/quickstart.yaml`: batch sizes 8 to 512, 6 trials each, a
step budget that is tight at batch size 8, pruning, so about half the trials stop short and
count as censored; B_noise near the largest batch size, as its real run read). Each synthetic
study is fitted with `fit_surrogate` on all its trials and read with `scaling_answers`
(`sim.answer_coverage`). Prints, per condition and answer, the share of intervals that held the
truth, its Monte Carlo standard error and, for the batch-size answers, how often the estimate was
the true batch size, and how often a continuous answer was printed open (an end of its interval
the model's search range: "at least 66") and held; writes the same to ``--out`` (JSON).

A study costs about 0.3 s of one core to simulate, fit and read (0.25-0.35 s at either size):
400 studies of the 7 conditions take about 15 minutes on one worker.

Usage: python benchmarks/answer_coverage.py [--studies 300] [--workers 2] [--seed 0]
    [--conditions A B C D Q Q1 R P] [--out benchmarks/results/answer_coverage.json]
"""

from __future__ import annotations

import os

# One BLAS thread per worker: the fits are many small problems, and L-BFGS-B's BLAS calls on
# several threads per process ran ~5x slower on a shared 2-core machine.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
from sim.answer_coverage import ANSWERS, BATCH_ANSWERS, answer_coverage  # noqa: E402
from sim.simulate import QUICKSTART, StudyDesign  # noqa: E402

from study.config.study import PRUNE_SLACK  # noqa: E402

HERE = Path(__file__).resolve().parent
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
    # The quickstart's real run (examples/quickstart/optuna.journal): 11 of 24 trials reached
    # the target, 13 were pruned, none diverged (rates up to 5x the best one trained slowly),
    # sigma 0.12-0.28 in log steps, a 2000-step budget about 1.5x the steps of batch size 8,
    # every step evaluated near the target, B_noise 329 (56-1980) and a knee q of 1.8 that its
    # 4 batch sizes cannot pin (the MNIST-1D MLP's dense grids read 3-4): q is drawn per study.
    # Q1: McCandlish's q = 1 (the boundary of the fit's range); R: read on the geometric:1.1
    # grid without the runner's fine evaluation (brackets about 10% wide).
    "Q: quickstart (8-512 x 6, pruning), knee q 1-4, noise 0.15, jagged 0.15": QUICKSTART,
    "Q1: as Q, knee q = 1": dataclasses.replace(QUICKSTART, knee_range=None, knee=1.0),
    "R: as Q, read on the geometric:1.1 grid": dataclasses.replace(
        QUICKSTART, fine=False, eval_ratio=1.1
    ),
    # P: the benchmark's size as its study files run it, with pruning at the default slack
    # (`tuner.prune_slack`), knee q drawn from 1 to 8 (the fit's range; the MLP question's grids
    # read 3.8). Last, so the conditions before it keep their seeds.
    "P: as A, pruning, knee q 1-8": StudyDesign(
        batch_sizes=SIZES,
        trials_per_batch=8,
        noise=0.10,
        jagged=0.15,
        pruning=True,
        prune_slack=PRUNE_SLACK,
        knee_range=(1.0, 8.0),
    ),
}


def run(args: tuple[str, StudyDesign, int, int]) -> pd.DataFrame:
    name, design, studies, seed = args
    return answer_coverage(design, studies, seed=seed).assign(condition=name)


def cell(row: pd.Series) -> str:
    """``"94.7% (1.0)"``, with ``[62% exact]`` for a batch-size answer and ``[16% open, 100%
    held]`` for a continuous one printed open in some studies."""
    if not row["studies"]:
        return "-"
    text = f"{100 * row['coverage']:.1f}% ({100 * row['se']:.1f})"
    if row["answer"] in BATCH_ANSWERS:
        text += f" [{100 * row['exact']:.0f}% exact]"
    elif row["open"] > 0:
        share = f"{100 * row['open']:.0f}" if row["open"] >= 0.01 else f"{100 * row['open']:.1f}"
        text += f" [{share}% open, {100 * row['open_held']:.0f}% held]"
    return text


def result(
    chosen: dict[str, StudyDesign],
    tables: list[pd.DataFrame],
    args: argparse.Namespace,
    seconds: float,
) -> dict:
    """The JSON written to ``--out``: the settings and, per condition, its design and per
    answer the studies counted, coverage, Monte Carlo se and share exact."""

    def plain(x: float) -> float | None:
        return None if isinstance(x, float) and math.isnan(x) else x

    return {
        "studies_per_condition": args.studies,
        "seed": args.seed,
        "seconds": round(seconds, 1),
        "workers": args.workers,
        "conditions": {
            name: {
                "design": dataclasses.asdict(design),
                "answers": {
                    row["answer"]: {
                        "studies": int(row["studies"]),
                        "coverage": plain(float(row["coverage"])),
                        "se": plain(float(row["se"])),
                        "exact": plain(float(row["exact"])),
                        "open": plain(float(row["open"])),
                        "open_held": plain(float(row["open_held"])),
                    }
                    for _, row in table.iterrows()
                },
            }
            for (name, design), table in zip(chosen.items(), tables, strict=True)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=300, help="studies per condition")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--conditions", nargs="+", choices=[n.split(":")[0] for n in CONDITIONS], default=None
    )
    parser.add_argument("--out", default=str(HERE / "results" / "answer_coverage.json"))
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
    print(
        "Coverage of the printed two-sided 95% intervals (Monte Carlo se); batch sizes: share "
        "exact in brackets; an interval printed open (an end the search range's, \"at least "
        '66"): share open and share of those that held\n'
    )
    print("| answer | " + " | ".join(short) + " |")
    print("|---|" + "---|" * len(short))
    for answer in ANSWERS:
        cells = [cell(table[table["answer"] == answer].iloc[0]) for table in tables]
        print(f"| {answer} | " + " | ".join(cells) + " |")
    for name in chosen:
        print(f"\n{name}")
    print(f"\n{args.studies} studies per condition, {elapsed:.0f} s with {args.workers} workers")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result(chosen, tables, args, elapsed), indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
