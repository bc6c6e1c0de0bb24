"""What OpenBLAS' threads cost the analysis: the model of every trial (`fit_surrogate`) and the
answers drawn from it (`scaling_answers`), timed with BLAS at its default threads and at one
(`study.analysis.threads.one_blas_thread`, what the analysis runs on).

Each round fits the same synthetic studies (`sim.simulate`, condition A of
`benchmarks/answer_coverage.py`: 7 batch sizes x 8 trials) both ways, alternating, and prints
per study the median wall and CPU seconds of each and their ratio. CPU counts every thread of
this process, so threads that spin waiting for work count too.

Usage: python benchmarks/analysis_threads.py [--studies N] [--rounds R] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import threadpoolctl
from sim.simulate import StudyDesign, draw_truth, simulate_trials

from study.analysis.answers import scaling_answers
from study.analysis.surrogate import fit_surrogate

SIZES = (16, 32, 64, 128, 256, 512, 1024)
DESIGN = StudyDesign(batch_sizes=SIZES, trials_per_batch=8, noise=0.10, jagged=0.15)


def one_study(trials, *, limited: bool) -> tuple[float, float]:
    """Wall and CPU seconds of the fit and its answers, on one BLAS thread or BLAS' default."""
    fit = fit_surrogate if limited else fit_surrogate.__wrapped__
    answers = scaling_answers if limited else scaling_answers.__wrapped__
    wall, cpu = time.perf_counter(), time.process_time()
    result = answers(fit(trials), accelerators=8, seed=0)
    assert result.ok
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    studies = [simulate_trials(draw_truth(DESIGN, rng), DESIGN, rng) for _ in range(args.studies)]
    default_threads = {lib["prefix"]: lib["num_threads"] for lib in threadpoolctl.threadpool_info()}
    times: dict[str, list[tuple[float, float]]] = {"default": [], "one": []}
    for _ in range(args.rounds):
        for trials in studies:
            times["default"].append(one_study(trials, limited=False))
            times["one"].append(one_study(trials, limited=True))
    rows = {
        kind: {
            "wall_s": statistics.median(w for w, _ in pairs),
            "cpu_s": statistics.median(c for _, c in pairs),
        }
        for kind, pairs in times.items()
    }
    print(f"BLAS libraries and their default threads: {default_threads}")
    print(f"{args.studies} studies x {args.rounds} rounds, median per study:")
    for kind, row in rows.items():
        print(f"  BLAS {kind:>7} thread(s): {row['wall_s']:.3f} s wall, {row['cpu_s']:.3f} s CPU")
    ratio = rows["default"]["wall_s"] / rows["one"]["wall_s"]
    print(f"  one thread is {ratio:.1f}x faster in wall time")
    if args.json:
        args.json.write_text(json.dumps({"threads": default_threads, **rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
