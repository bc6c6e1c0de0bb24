"""Do short study trials report the training speed of a long steady run?

For each strategy (``default``, ``mirrored:2``) and batch size, six quickstart trials (MNIST-1D
MLP on 4,000 examples, target 50% validation accuracy, budget 2,000 steps, evaluation on
``geometric:1.1``, Nesterov at six learning rates log-spaced over [0.01, 1]) give the seconds per
step a report shows: the fit of every evaluation interval (one compiled call each) to
``a + b * steps``, ``b`` being the cost of a step and ``a`` the fixed cost of a call, as
`study.analysis.measures.throughput_by_strategy` computes it (`call_and_step_seconds`). The
reference is a steady run of 3,000 steps in one compiled call. Target: within 20%.

Also shown, from the same trials: ``median``, the median over trials of training seconds per
step (what reports showed before), and ``pooled``, all their training seconds over all their
steps. Each trial and the steady run are
repeated ``--repeats`` times, interleaved, and keep their fastest run (and fastest interval):
other load on the machine only ever adds time.

Usage: python benchmarks/trial_seconds_per_step.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics

from trainer_bench import run_workers, start

from study.analysis.measures import call_and_step_seconds

BATCHES = (8, 32, 128, 512)
RATES = (0.01, 0.025, 0.063, 0.16, 0.4, 1.0)
STEADY_STEPS = 3000


def interval_seconds(curve: tuple) -> list[float]:
    return [b.train_seconds - a.train_seconds for a, b in itertools.pairwise(curve)]


def measure(strategy_name: str, repeats: int) -> dict:
    bench = start(strategy_name, samples=4000)
    out: dict = {}
    for batch in BATCHES:
        steady, trials = [], {lr: [] for lr in RATES}
        for _ in range(repeats):  # interleaved, so a busy spell slows both alike
            run = bench.trial(batch, STEADY_STEPS, str(STEADY_STEPS))
            steady.append(run.train_seconds / run.steps_run)
            for lr in RATES:
                trials[lr].append(
                    bench.trial(batch, 2000, "geometric:1.1", lr=lr, target="val_accuracy>=0.5")
                )
        rows = []
        for runs in trials.values():  # a trial repeats exactly (same seed): same intervals
            steps = [b.step - a.step for a, b in itertools.pairwise(runs[0].curve)]
            fastest = [min(s) for s in zip(*(interval_seconds(r.curve) for r in runs))]
            rows.append(
                {
                    "steps": runs[0].steps_run,
                    "seconds": min(r.train_seconds for r in runs),
                    "intervals": list(zip(steps, fastest)),
                }
            )
        out[str(batch)] = {"steady_s": min(steady), "trials": rows}
    return out


def summarise(r: dict) -> dict:
    import numpy as np

    trained = [t for t in r["trials"] if t["steps"] > 0 and t["seconds"] > 0]
    intervals = np.array([i for t in trained for i in t["intervals"]])
    a, b = call_and_step_seconds(intervals[:, 0], intervals[:, 1])
    return {
        "report": b,
        "median": 1.0 / statistics.median(t["steps"] / t["seconds"] for t in trained),
        "pooled": sum(t["seconds"] for t in trained) / sum(t["steps"] for t in trained),
        "call": a,
        "step": b,
        "shapes": " ".join(f"{t['steps']}/{len(t['intervals'])}" for t in r["trials"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.repeats)))
        return
    print("us per training step of quickstart trials vs a steady 3,000-step run (ratio to it)")
    print(
        f"{'strategy':<12}{'batch':>6}{'steady':>8}{'report':>14}{'pooled':>14}"
        f"{'fit: a per call + b per step':>32}  trials (steps/calls)"
    )
    for name, rows in run_workers(__file__, ["--repeats", str(args.repeats)]).items():
        for batch, r in rows.items():
            s, steady = summarise(r), r["steady_s"]
            print(
                f"{name:<12}{batch:>6}{1e6 * steady:>8.0f}"
                f"{1e6 * s['report']:>8.0f} {s['report'] / steady:>5.2f}"
                f"{1e6 * s['pooled']:>8.0f} {s['pooled'] / steady:>5.2f}"
                f"{1e6 * s['call']:>12.0f} +{1e6 * s['step']:>6.0f} ({s['step'] / steady:.2f})"
                f"  {s['shapes']}"
            )


if __name__ == "__main__":
    main()
