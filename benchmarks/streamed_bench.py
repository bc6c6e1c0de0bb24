"""The streamed input path against the in-memory path and `Model.fit`, and what reusing a
trial's session saves (MNIST-1D MLP).

Per strategy (``default``, ``mirrored:2``) and global batch size (32, 512), microseconds per
training step, evaluation excluded, best of ``--repeats`` runs of ``--steps`` steps, of:

  (a) the trainer on in-memory arrays (`study.trainer.loop.train`, its own training clock),
  (b) the trainer on `Streams` (a `tf.data` pipeline: shuffled with the seed, a fresh order
      per epoch; distributed with ``distribute_datasets_from_function``),
  (c) `Model.fit` with default settings on the same pipeline (repeated, batched, prefetched),
      after an untimed warm-up fit,
  (d) the pipeline alone: its global batches pulled in a compiled loop, nothing trained (what
      (b) pays on top of (a) when no core is free to overlap it with training),

each for two forms of the pipeline: ``examples`` (single examples, shuffled with a buffer of
the whole epoch, batched by `tf.data`) and ``blocks`` (`Streams.blocks`: slices of 1,024 rows,
shuffled in a window of the whole epoch by one gather, cut into batches by slicing; what a
chunked file reader gives, see `study.workloads.blocks`).

Then the per-trial overhead a quickstart-like trial pays besides training (MNIST-1D MLP, batch
32, 300 steps, geometric:1.1 evaluations): build, trace and evaluate seconds of a fresh trial
(a new session each time) and of a reused one (the session of the previous trial, another
learning rate and seed), median of ``--trials`` trials.

Each strategy runs in its own process (logical CPU devices are fixed when TensorFlow starts).
Usage: python benchmarks/streamed_bench.py [--steps 3000] [--repeats 3] [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from trainer_bench import run_workers, start

BATCHES = (32, 512)


FORMS = ("examples", "blocks")
BLOCK_ROWS = 1024


def pipeline(bench: Any, form: str, seed: int = 0, shards: int = 1, index: int = 0) -> Any:
    """The training examples as a `tf.data` epoch, shuffled with ``seed`` (fresh per epoch):
    single examples, or row blocks (``form``)."""
    from study.workloads.blocks import array_blocks, shuffled_rows

    tf, data = bench.tf, bench.data
    n = len(data.y_train)
    if form == "blocks":
        blocks = array_blocks(data.x_train, data.y_train, BLOCK_ROWS)
        return shuffled_rows(blocks.shard(shards, index), seed, window=n)
    examples = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
    examples = examples.shard(shards, index)
    return examples.shuffle(n, seed=seed, reshuffle_each_iteration=True)


def batched(bench: Any, form: str, batch: int) -> Any:
    """The pipeline repeated and cut into global batches, as the trainer cuts it."""
    from study.workloads.blocks import batches_of

    epochs = pipeline(bench, form).repeat()
    if form == "blocks":
        return batches_of(epochs, batch)
    return epochs.batch(batch, drop_remainder=True)


def streams(bench: Any, form: str) -> Any:
    from study.workloads.base import Streams
    from study.workloads.blocks import array_blocks

    data, tf = bench.data, bench.tf
    blocks = form == "blocks"
    return Streams(
        train=lambda seed, shards, index: pipeline(bench, form, seed, shards, index),
        val=lambda: (
            array_blocks(data.x_val, data.y_val, BLOCK_ROWS)
            if blocks
            else tf.data.Dataset.from_tensor_slices((data.x_val, data.y_val))
        ),
        input_shape=data.input_shape,
        num_classes=data.num_classes,
        train_examples=len(data.y_train),
        val_examples=len(data.y_val),
        blocks=blocks,
    )


def spec(bench: Any, batch: int, steps: int, cadence: str, lr: float = 0.01, seed: int = 0):
    from study.config.target import Target
    from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSettings, TrialSpec

    return TrialSpec(
        workload="mnist1d",
        batch_size=batch,
        optimizer=OptimizerSpec("nesterov", lr),
        target=Target.parse("val_accuracy>=2"),  # never met: the whole budget runs
        strategy=bench.strategy_name,
        settings=TrialSettings(
            budget=Budget(max_steps=steps), cadence=EvalCadence.parse(cadence), seed=seed
        ),
    )


def trainer_us(bench: Any, data: Any, batch: int, steps: int) -> float:
    from study.trainer.loop import train

    result = train(
        spec(bench, batch, steps, str(steps)),
        data,
        lambda: bench.workload.build_model("mlp", bench.data),
        bench.strategy,
        bench.resolved,
    )
    return 1e6 * result.train_seconds / result.steps_run


def fit_us(bench: Any, form: str, batch: int, steps: int) -> float:
    keras = bench.keras
    keras.backend.clear_session()
    with bench.strategy.scope():
        model = bench.workload.build_model("mlp", bench.data)
        model.compile(
            optimizer=keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    dataset = batched(bench, form, batch).prefetch(2)
    model.fit(dataset, steps_per_epoch=20, epochs=1, verbose=0)  # trace and warm up
    begin = time.perf_counter()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
    return 1e6 * (time.perf_counter() - begin) / steps


def pipeline_us(bench: Any, form: str, batch: int, steps: int) -> float:
    tf = bench.tf
    dataset = batched(bench, form, batch).prefetch(tf.data.AUTOTUNE)
    iterator = iter(dataset)

    @tf.function
    def pull(n: Any) -> Any:
        total = tf.constant(0.0)
        for _ in tf.range(n):
            x, _y = next(iterator)
            total += x[0, 0]
        return total

    pull(tf.constant(20))
    begin = time.perf_counter()
    pull(tf.constant(steps)).numpy()
    return 1e6 * (time.perf_counter() - begin) / steps


def overhead(bench: Any, trials: int) -> dict[str, dict[str, float]]:
    """Median build, trace and evaluate seconds of fresh and of reused trials."""
    from study.trainer.loop import train
    from study.trainer.session import SessionCache

    def one(cache: Any, i: int) -> dict[str, float]:
        result = train(
            spec(bench, 32, 300, "geometric:1.1", lr=0.01 * (1 + i), seed=i),
            bench.data,
            lambda: bench.workload.build_model("mlp", bench.data),
            bench.strategy,
            bench.resolved,
            cache=cache,
        )
        assert result.environment["reused"] is (cache is not None and i > 0)
        return {**result.timings, "evaluations": len(result.curve)}

    fresh = [one(None, i) for i in range(trials)]
    cache = SessionCache()
    reused = [one(cache, i) for i in range(trials + 1)][1:]
    return {
        name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for name, runs in (("fresh", fresh), ("reused", reused))
    }


def measure(strategy_name: str, steps: int, repeats: int, trials: int) -> dict:
    bench = start(strategy_name)
    out: dict = {"steps": {}}
    for batch in BATCHES:
        memory = min(trainer_us(bench, bench.data, batch, steps) for _ in range(repeats))
        for form in FORMS:
            streamed = streams(bench, form)
            stream = [trainer_us(bench, streamed, batch, steps) for _ in range(repeats)]
            fits = [fit_us(bench, form, batch, steps) for _ in range(max(1, repeats - 1))]
            alone = [pipeline_us(bench, form, batch, steps) for _ in range(repeats)]
            out["steps"][f"{batch} {form}"] = {
                "memory_us": memory,
                "streamed_us": min(stream),
                "fit_us": min(fits),
                "pipeline_us": min(alone),
            }
    out["overhead"] = overhead(bench, trials)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps, args.repeats, args.trials)))
        return
    rows = run_workers(
        __file__,
        ["--steps", str(args.steps), "--repeats", str(args.repeats), "--trials", str(args.trials)],
    )
    print(f"MNIST-1D MLP, {args.steps} steps, best of {args.repeats}; microseconds per step")
    print(
        f"{'strategy':<12}{'batch':>6} {'form':<9}{'(a) memory':>12}{'(b) streamed':>14}"
        f"{'(c) fit':>10}"
        f"{'(d) pipeline':>14}{'b/a':>7}{'c/b':>7}"
    )
    for name, out in rows.items():
        for key, r in out["steps"].items():
            batch, form = key.split()
            print(
                f"{name:<12}{batch:>6} {form:<9}{r['memory_us']:>12.0f}{r['streamed_us']:>14.0f}"
                f"{r['fit_us']:>10.0f}{r['pipeline_us']:>14.0f}"
                f"{r['streamed_us'] / r['memory_us']:>7.2f}"
                f"{r['fit_us'] / r['streamed_us']:>7.2f}"
            )
    print(f"\nPer-trial overhead, batch 32, 300 steps, median of {args.trials} trials (seconds)")
    print(
        f"{'strategy':<12}{'session':<8}{'build':>8}{'trace':>8}{'evaluate':>10}{'evals':>7}"
        f"{'total':>8}"
    )
    for name, out in rows.items():
        for kind, t in out["overhead"].items():
            total = t["build"] + t["trace"] + t["evaluate"]
            print(
                f"{name:<12}{kind:<8}{t['build']:>8.3f}{t['trace']:>8.3f}{t['evaluate']:>10.3f}"
                f"{t['evaluations']:>7.0f}{total:>8.3f}"
            )


if __name__ == "__main__":
    main()
