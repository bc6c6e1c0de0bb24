"""Is training time flat across a trial's evaluation intervals? And what does one call cost?

(1) 400-step MNIST-1D MLP trials at batch 512 and 32 on a geometric cadence (the quickstart's
``geometric:1.1``), each run ``--repeats`` times: every interval's seconds per step from the
trial's own training clock, the median, and the largest ratio of an interval of 2 or more steps
to the median, for each run and for the fastest of each interval across runs (target: at most
3x; a trace inside the timed region shows up in every run as one interval costing 100x or more).

(2) The fixed cost of one compiled training call: trials evaluating every k = 1, 10, 100, 1000
steps (one call per interval), best of ``--repeats``, fitted as seconds per step = b + a / k,
so a is the cost per call and b the cost per step.

Usage: python benchmarks/timing_flatness.py [--steps 400] [--cadence geometric:1.1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics

from trainer_bench import run_workers, start

BATCHES = (512, 32)
CHUNKS = (1, 10, 100, 1000)


def intervals(curve: tuple) -> list[tuple[int, int, float]]:
    """(step a, step b, seconds per step between them) for each pair of evaluations."""
    return [
        (a.step, b.step, (b.train_seconds - a.train_seconds) / (b.step - a.step))
        for a, b in itertools.pairwise(curve)
    ]


def measure(strategy_name: str, steps: int, cadence: str, repeats: int) -> dict:
    import numpy as np

    bench = start(strategy_name)
    out: dict = {}
    for batch in BATCHES:
        runs = [intervals(bench.trial(batch, steps, cadence).curve) for _ in range(repeats)]
        per_step = {}
        for k in CHUNKS:
            chunked = [bench.trial(batch, max(2000, 3 * k), str(k)) for _ in range(repeats)]
            per_step[k] = min(r.train_seconds / r.steps_run for r in chunked)
        a, b = np.polyfit([1.0 / k for k in CHUNKS], [per_step[k] for k in CHUNKS], 1)
        out[str(batch)] = {
            "runs": runs,
            "per_step": per_step,
            "call_s": float(a),
            "step_s": float(b),
        }
    return out


def worst(rows: list) -> tuple[float, float, int, int]:
    """The median seconds per step and the largest ratio to it of an interval of >= 2 steps."""
    median = statistics.median(s for _, _, s in rows)
    ratio, a, b = max((s / median, a, b) for a, b, s in rows if b - a >= 2)
    return median, ratio, a, b


def report(name: str, batch: str, r: dict) -> None:
    # The intervals repeat exactly; the fastest of each across runs drops other load's spikes.
    best = [(a, b, min(run[i][2] for run in r["runs"])) for i, (a, b, _) in enumerate(r["runs"][0])]
    print(f"\n{name}, batch {batch}: ms per step for each interval (steps a-b), best of runs")
    cells = [f"{a}-{b}: {1e3 * s:.3f}" for a, b, s in best]
    for i in range(0, len(cells), 6):
        print("  " + "  ".join(f"{c:<17}" for c in cells[i : i + 6]))
    for label, rows in [
        *((f"run {i + 1}", run) for i, run in enumerate(r["runs"])),
        ("best", best),
    ]:
        median, ratio, a, b = worst(rows)
        print(
            f"  {label:<6} median {1e3 * median:.3f} ms/step; worst interval of >= 2 steps "
            f"{a}-{b}: {ratio:.2f}x the median (target <= 3x)"
        )
    chunks = ", ".join(f"k={k}: {1e6 * s:.0f}" for k, s in r["per_step"].items())
    print(f"  us per step evaluating every k steps: {chunks}")
    print(f"  fit: {1e6 * r['call_s']:.0f} us per call + {1e6 * r['step_s']:.0f} us per step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--cadence", default="geometric:1.1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps, args.cadence, args.repeats)))
        return
    extra = ["--steps", str(args.steps), "--cadence", args.cadence, "--repeats", str(args.repeats)]
    print(f"MNIST-1D MLP, {args.steps}-step trials, cadence {args.cadence}")
    for name, rows in run_workers(__file__, extra).items():
        for batch, r in rows.items():
            report(name, batch, r)


if __name__ == "__main__":
    main()
