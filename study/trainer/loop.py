"""The steps-to-target training loop.

One compiled `tf.function` runs many training steps per call (a `tf.while_loop` around
`strategy.run`), so per-step Python overhead vanishes; it returns after exactly as many steps as
remain until the next evaluation. Its input signature leaves the number of steps unknown, so
one trace, made and run once before the clock starts, serves every chunk length a cadence asks
for. Only the compiled calls are timed: tracing, the warm-up step and evaluation are excluded
from training seconds. The global batch is gathered once and each replica takes its contiguous
slice, so `default` and `mirrored:N` do the same arithmetic with the same global batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from study.config.trial import TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.strategies import ResolvedStrategy, check_batch_divisible
from study.trainer.optim import make_optimizer
from study.workloads.base import Dataset

#: Called after every evaluation that did not end the trial (target met, diverged, budget spent);
#: return False to stop the trial (it is then ``pruned``).
MeasurementHook = Callable[[Measurement], bool]

_MAX_INDICES_PER_CALL = 1 << 22  # bounds the index array handed to one compiled call
_EVAL_CHUNK = 8192


class IndexStream:
    """Example indices in epoch order: a fresh seeded permutation per epoch, batches may span
    epochs, so every example is seen once per epoch at any batch size.
    """

    def __init__(self, n: int, seed: int) -> None:
        self._n = n
        self._rng = np.random.default_rng(seed)
        self._buffer = np.empty(0, dtype=np.int32)

    def take(self, count: int) -> np.ndarray:
        while self._buffer.size < count:
            perm = self._rng.permutation(self._n).astype(np.int32)
            self._buffer = np.concatenate([self._buffer, perm])
        out, self._buffer = self._buffer[:count], self._buffer[count:]
        return out


@dataclass
class _Compiled:
    """A trial's compiled functions.

    ``train_chunk`` is the one concrete function of ``train_function``, traced for index arrays
    of shape [steps, batch] with ``steps`` unknown: called directly, it skips tf.function's
    argument matching on every call and can never retrace.
    """

    train_function: Any
    train_chunk: Any
    evaluate: Any


def _compile(
    strategy: Any, model: keras.Model, optimizer: Any, data: Dataset, batch_size: int
) -> _Compiled:
    replicas = strategy.num_replicas_in_sync
    per_replica = batch_size // replicas
    x_train = tf.constant(data.x_train)
    y_train = tf.constant(data.y_train.astype(np.int32))
    x_val = tf.constant(data.x_val)
    y_val = tf.constant(data.y_val.astype(np.int32))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    variables = model.trainable_variables
    inv_batch = 1.0 / batch_size

    def replica_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        if replicas > 1:
            start = tf.distribute.get_replica_context().replica_id_in_sync_group * per_replica
            xb = xb[start : start + per_replica]
            yb = yb[start : start + per_replica]
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = tf.reduce_sum(loss_fn(yb, logits)) * inv_batch
            if model.losses:
                loss += tf.add_n(model.losses) / replicas
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    # One trace for every chunk length: [steps, batch] with steps unknown.
    @tf.function(input_signature=[tf.TensorSpec([None, batch_size], tf.int32)])
    def train_chunk(indices: tf.Tensor) -> tf.Tensor:
        steps = tf.shape(indices)[0]
        losses = tf.TensorArray(tf.float32, size=steps)
        for i in tf.range(steps):
            idx = indices[i]
            xb = tf.gather(x_train, idx)
            yb = tf.gather(y_train, idx)
            per_replica_loss = strategy.run(replica_step, args=(xb, yb))
            loss = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_loss, axis=None)
            losses = losses.write(i, loss)
        return losses.stack()

    @tf.function
    def eval_chunk(xv: tf.Tensor, yv: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = model(xv, training=False)
        loss_sum = tf.reduce_sum(loss_fn(yv, logits))
        correct = tf.reduce_sum(
            tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), yv), tf.float32)
        )
        return loss_sum, correct

    n_val = int(data.y_val.shape[0])

    def evaluate() -> dict[str, float]:
        loss_sum, correct = 0.0, 0.0
        for start in range(0, n_val, _EVAL_CHUNK):
            ls, c = eval_chunk(
                x_val[start : start + _EVAL_CHUNK], y_val[start : start + _EVAL_CHUNK]
            )
            loss_sum += float(ls)
            correct += float(c)
        accuracy = correct / max(1, n_val)
        return {
            "val_loss": loss_sum / max(1, n_val),
            "val_accuracy": accuracy,
            "val_error": 1.0 - accuracy,
        }

    return _Compiled(
        train_function=train_chunk,
        train_chunk=train_chunk.get_concrete_function(),
        evaluate=evaluate,
    )


def _warm_up(
    compiled: _Compiled, model: keras.Model, optimizer: Any, batch_size: int, n: int
) -> None:
    """Optimise and run one step untimed, then restore every variable.

    The first call of the compiled loop pays for graph optimisation and allocation, which is not
    training time; like the trace made by `_compile`, it serves every later chunk length.
    Restoring the weights and optimizer state keeps the trial exactly as if the step had not run.
    """
    variables = list(model.variables) + list(optimizer.variables)
    saved = [v.numpy() for v in variables]
    indices = np.arange(batch_size, dtype=np.int32) % n
    compiled.train_chunk(tf.constant(indices[None, :])).numpy()
    for variable, value in zip(variables, saved):
        variable.assign(value)


def train(
    spec: TrialSpec,
    data: Dataset,
    build_model: Callable[[], keras.Model],
    strategy: Any,
    resolved: ResolvedStrategy,
    hook: MeasurementHook | None = None,
) -> TrialResult:
    """Train until the target holds, the budget runs out, the loss diverges or `hook` says stop.

    Returns a `TrialResult` whose ``steps_to_target`` is the first evaluation step at which
    ``spec.target`` held (evaluations at step 0 and on ``spec.cadence``).
    """
    replicas = strategy.num_replicas_in_sync
    check_batch_divisible(spec.batch_size, replicas, strategy=spec.strategy)
    keras.utils.set_random_seed(spec.seed)
    step_limit = spec.budget.step_limit(spec.batch_size)
    with strategy.scope():
        model = build_model()
        optimizer = make_optimizer(spec.optimizer, spec.schedule, step_limit)
        optimizer.build(model.trainable_variables)
    compiled = _compile(strategy, model, optimizer, data, spec.batch_size)
    _warm_up(compiled, model, optimizer, spec.batch_size, int(data.y_train.shape[0]))
    stream = IndexStream(int(data.y_train.shape[0]), spec.seed)
    environment = {
        "strategy": resolved.kind.value,
        "strategy_requested": spec.strategy,
        "replicas": replicas,
        "per_replica_batch": spec.batch_size // replicas,
        "devices": ",".join(resolved.devices),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
    }
    max_chunk = max(1, _MAX_INDICES_PER_CALL // spec.batch_size)

    curve: list[Measurement] = []
    step, seconds, pending_losses = 0, 0.0, []
    state = TrialState.RUNNING
    while True:
        train_loss = float(np.mean(pending_losses)) if pending_losses else math.nan
        pending_losses = []
        m = Measurement(step, step * spec.batch_size, seconds, train_loss, compiled.evaluate())
        curve.append(m)
        if spec.target.met_by(m.metrics):
            state = TrialState.REACHED
            break
        if not math.isfinite(m.metrics["val_loss"]) or (step and not math.isfinite(train_loss)):
            state = TrialState.DIVERGED
            break
        if hook is not None and not hook(m):
            state = TrialState.PRUNED
            break
        out_of_time = spec.budget.max_seconds is not None and seconds >= spec.budget.max_seconds
        if (step_limit is not None and step >= step_limit) or out_of_time:
            state = TrialState.NOT_REACHED
            break
        stop = spec.cadence.next_step(step)
        if step_limit is not None:
            stop = min(stop, step_limit)
        while step < stop:
            count = min(stop - step, max_chunk)
            indices = tf.constant(
                stream.take(count * spec.batch_size).reshape(count, spec.batch_size)
            )
            start = time.perf_counter()  # the compiled call and fetching its losses
            losses = compiled.train_chunk(indices).numpy()
            seconds += time.perf_counter() - start
            step += count
            pending_losses.extend(losses.tolist())
            if not np.all(np.isfinite(losses)):
                break

    reached = curve[-1] if state is TrialState.REACHED else None
    return TrialResult(
        state=state,
        steps_run=step,
        examples_run=step * spec.batch_size,
        train_seconds=seconds,
        steps_to_target=reached.step if reached else None,
        examples_to_target=reached.examples if reached else None,
        seconds_to_target=reached.train_seconds if reached else None,
        curve=tuple(curve),
        environment=environment,
    )
