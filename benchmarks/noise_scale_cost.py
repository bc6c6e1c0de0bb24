"""What measuring the gradient noise scale costs per training step (MNIST-1D MLP).

Per strategy (``default``: two half-batch micro-batches; ``mirrored:2``: per-replica gradients
and one extra all-reduce) and global batch size, microseconds per training step with
``noise_scale`` off and on at the default cadence (one step in 16; ``--every`` to change it)
(the trainer's own training clock: tracing, warm-up and evaluation excluded), best of
``--repeats`` interleaved runs of ``--steps`` steps, and the overhead in percent: of the best
runs, and the median over the repeats of each off/on pair (robust to drifting load). With it
off the step is the same graph as before the feature (nothing is computed), so "off" is also
the baseline.

Each strategy runs in its own process (logical CPU devices are fixed when TensorFlow starts).
Usage: python benchmarks/noise_scale_cost.py [--steps 3000] [--repeats 5] [--every 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from trainer_bench import run_workers, start

from study.config.trial import NOISE_EVERY

BATCHES = (32, 512)


def us_per_step(bench: Any, batch: int, steps: int, noise: bool, every: int) -> float:
    from study.config.target import Target
    from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSettings, TrialSpec
    from study.trainer.loop import train

    spec = TrialSpec(
        workload="mnist1d",
        batch_size=batch,
        optimizer=OptimizerSpec("nesterov", 0.01),
        target=Target.parse("val_accuracy>=2"),  # never met: the whole budget runs
        strategy=bench.strategy_name,
        settings=TrialSettings(
            budget=Budget(max_steps=steps),
            cadence=EvalCadence.parse(str(steps)),
            noise_scale=noise,
            noise_every=every,
        ),
    )
    bench.keras.backend.clear_session()
    result = train(
        spec,
        bench.data,
        lambda: bench.workload.build_model("mlp", bench.data),
        bench.strategy,
        bench.resolved,
    )
    if noise:
        assert result.curve[-1].noise, "no noise estimate"
    return 1e6 * result.train_seconds / result.steps_run


def measure(strategy: str, steps: int, repeats: int, every: int) -> dict[str, dict[str, float]]:
    bench = start(strategy)
    out = {}
    for batch in BATCHES:
        runs = {False: [], True: []}
        for _ in range(repeats):  # interleaved, so drift in the machine's load hits both
            for noise in (False, True):
                runs[noise].append(us_per_step(bench, batch, steps, noise, every))
        pairs = [on / off for off, on in zip(runs[False], runs[True], strict=True)]
        out[str(batch)] = {
            "off_us": min(runs[False]),
            "on_us": min(runs[True]),
            "median_ratio": statistics.median(pairs),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--every", type=int, default=NOISE_EVERY, help="measure one step in N")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps, args.repeats, args.every)))
        return
    flags = ["--steps", str(args.steps), "--repeats", str(args.repeats), "--every", str(args.every)]
    rows = run_workers(__file__, flags)
    print(
        f"MNIST-1D MLP, noise measured on one step in {args.every}, {args.steps} steps, "
        f"{args.repeats} interleaved repeats; microseconds per step (best)"
    )
    print(f"{'strategy':<12}{'batch':>6}{'off':>9}{'on':>9}{'best':>9}{'median':>9}")
    for name, out in rows.items():
        for batch, r in out.items():
            best = 100 * (r["on_us"] / r["off_us"] - 1)
            median = 100 * (r["median_ratio"] - 1)
            print(
                f"{name:<12}{batch:>6}{r['off_us']:>9.0f}{r['on_us']:>9.0f}"
                f"{best:>8.1f}%{median:>8.1f}%"
            )


if __name__ == "__main__":
    main()
