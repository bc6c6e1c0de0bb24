"""Trainer throughput against a hand-written loop and `Model.fit` (MNIST-1D MLP).

For each strategy (``default``, ``mirrored:2``) and global batch size (32, 512) this measures
training steps per second, evaluation excluded, of:

  (a) the shared trainer (`study.trainer.loop.train`, timed by its own training clock),
  (b) a hand-written `tf.function` running many steps per call (`strategy.run` inside it),
  (c) `Model.fit` with default settings (inside the strategy scope).

Best of ``--repeats`` runs of ``--steps`` steps ((c): one run fewer, it is slow). Each strategy
runs in its own process (logical CPU devices are fixed when TensorFlow starts).
Usage: python benchmarks/trainer_throughput.py [--steps 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time

from trainer_bench import run_workers, start

BATCHES = (32, 512)


def measure(strategy_name: str, steps: int, repeats: int) -> dict:
    bench = start(strategy_name)
    tf, keras, strategy = bench.tf, bench.keras, bench.strategy
    workload, data = bench.workload, bench.data
    out: dict = {}
    for batch in BATCHES:
        # (a) the trainer: one evaluation at step 0 and one at the end, one compiled call of
        # `steps` steps; training time only (tracing and the warm-up step are untimed).
        trainer = []
        for _ in range(repeats):
            result = bench.trial(batch, steps, str(steps))
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
    for name, rows in run_workers(
        __file__, ["--steps", str(args.steps), "--repeats", str(args.repeats)]
    ).items():
        for batch, r in rows.items():
            print(
                f"{name:<12}{batch:>6}{r['trainer_us']:>13.0f}{r['loop_us']:>10.0f}{r['fit_us']:>10.0f}"
                f"{r['trainer_us'] / r['loop_us']:>7.2f}{r['fit_us'] / r['trainer_us']:>7.2f}"
            )


if __name__ == "__main__":
    main()
