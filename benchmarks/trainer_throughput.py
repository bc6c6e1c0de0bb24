"""Trainer throughput against a hand-written loop and `Model.fit` (MNIST-1D MLP).

For each strategy (``default``, ``mirrored:2``) and global batch size (32, 512) this measures
training steps per second, evaluation excluded, of:

  (a) the shared trainer (`study.trainer.loop.train`, timed by its own training clock),
  (b) a hand-written `tf.function` running many steps per call (`strategy.run` inside it),
  (c) `Model.fit` with default settings (inside the strategy scope).

Each strategy runs in its own process (logical CPU devices are fixed when TensorFlow starts).
Usage: python benchmarks/trainer_throughput.py [--steps 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

BATCHES = (32, 512)
STRATEGIES = ("default", "mirrored:2")


def measure(strategy_name: str, steps: int, repeats: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from study.strategies import build_strategy, configure_devices, probe_host, resolve

    configure_devices(tf, 2 if strategy_name.startswith("mirrored") else 1)
    import keras

    from study.config.target import Target
    from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSpec
    from study.trainer.loop import train
    from study.workloads import get_workload

    workload = get_workload("mnist1d", {"samples": 10000})
    data = workload.load()
    resolved = resolve(strategy_name, probe_host(tf))
    strategy = build_strategy(tf, resolved)
    replicas = strategy.num_replicas_in_sync
    out: dict = {}
    for batch in BATCHES:
        # (a) the trainer: one evaluation at step 0 and one at the end; training time only.
        spec = TrialSpec(
            workload="mnist1d",
            batch_size=batch,
            optimizer=OptimizerSpec("nesterov", 0.01),
            target=Target.parse("val_accuracy>=2"),
            budget=Budget(max_steps=steps),
            cadence=EvalCadence(kind="fixed", every=steps),
            strategy=strategy_name,
        )
        trainer = []
        for _ in range(repeats):
            keras.backend.clear_session()
            result = train(
                spec, data, lambda: workload.build_model("mlp", data), strategy, resolved
            )
            trainer.append(result.train_seconds / result.steps_run)

        # (b) hand-written multi-step tf.function with strategy.run inside.
        def hand_written(batch: int = batch) -> float:
            keras.backend.clear_session()
            keras.utils.set_random_seed(0)
            with strategy.scope():
                model = workload.build_model("mlp", data)
                opt = keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True)
                opt.build(model.trainable_variables)
            loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
            ds = (
                tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
                .shuffle(len(data.y_train), seed=0)
                .repeat()
                .batch(batch, drop_remainder=True)
                .prefetch(4)
            )
            iterator = iter(strategy.experimental_distribute_dataset(ds))

            def step_fn(xb, yb, batch=batch):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(loss_fn(yb, model(xb, training=True))) / batch
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            @tf.function
            def many(n):
                for _ in tf.range(n):
                    xb, yb = next(iterator)
                    strategy.run(step_fn, args=(xb, yb))

            many(tf.constant(5))
            start = time.perf_counter()
            many(tf.constant(steps))
            return (time.perf_counter() - start) / steps

        loop = [hand_written() for _ in range(repeats)]

        # (c) Model.fit with default settings.
        def fit(batch: int = batch) -> float:
            keras.backend.clear_session()
            with strategy.scope():
                model = workload.build_model("mlp", data)
                model.compile(
                    optimizer=keras.optimizers.SGD(0.01, momentum=0.9, nesterov=True),
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                )
            n = (len(data.y_train) // batch) * batch
            epochs = max(2, steps * batch // n)
            x, y = data.x_train[:n], data.y_train[:n]
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # trace and warm up
            start = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0)
            return (time.perf_counter() - start) / (epochs * (n // batch))

        fits = [fit() for _ in range(max(1, repeats - 1))]
        out[str(batch)] = {
            "trainer_us": 1e6 * min(trainer),
            "loop_us": 1e6 * min(loop),
            "fit_us": 1e6 * min(fits),
            "replicas": replicas,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps, args.repeats)))
        return
    print(
        f"MNIST-1D MLP, {args.steps} steps, best of {args.repeats}; microseconds per training step"
    )
    print(
        f"{'strategy':<12}{'batch':>6}{'(a) trainer':>13}{'(b) loop':>10}{'(c) fit':>10}{'a/b':>7}{'c/a':>7}"
    )
    for name in STRATEGIES:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                name,
                "--steps",
                str(args.steps),
                "--repeats",
                str(args.repeats),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = json.loads(proc.stdout.strip().splitlines()[-1])
        for batch, r in rows.items():
            print(
                f"{name:<12}{batch:>6}{r['trainer_us']:>13.0f}{r['loop_us']:>10.0f}{r['fit_us']:>10.0f}"
                f"{r['trainer_us'] / r['loop_us']:>7.2f}{r['fit_us'] / r['trainer_us']:>7.2f}"
            )


if __name__ == "__main__":
    main()
