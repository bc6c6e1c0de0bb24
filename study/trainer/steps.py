"""One replica's training step: its share of the loss, its gradients and the update; and, for
the gradient noise scale, the step that also measures ``[|G_small|^2, |G_big|^2]``.

`study.trainer.session` builds a session's step here once and hands it to the feed, which wraps
it in the compiled multi-step loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from study.trainer.inputs import MeasuredSteps
from study.trainer.losses import Objective

__all__ = ["replica_step"]


def replica_step(
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    goal: Objective,
    strategy: Any,
    jit: bool,
    *,
    noise: int = 0,
) -> Callable[[tf.Tensor, tf.Tensor], Any] | MeasuredSteps:
    """One replica's step: its share of the global mean loss (per-example losses summed and
    divided by the global batch, plus the model's own losses split over the replicas), its
    gradients and the optimizer update (summed over replicas by the optimizer).

    The global batch is the replica's rows times the replicas, read in the graph, so the step
    serves any batch size (``1 / B`` is the same float32 a Python constant would be).

    With ``noise`` (N > 0) the step also returns ``[|G_small|^2, |G_big|^2]`` for the gradient
    noise scale (`study.trainer.noise`) on every N-th step (NaN on the others): on
    several replicas the per-replica mean gradients (batch B / R) and their all-reduced mean
    (batch B, one extra all-reduce); on one replica two half-batch micro-batches (B / 2; their
    gradients summed are the step's update, so a model with batch statistics sees half
    batches on those steps). Without it nothing extra is computed.

    With XLA, one replica compiles the whole step; several compile the forward and backward
    pass (the optimizer's cross-replica update stays outside the XLA cluster).
    """
    variables = model.trainable_variables
    replicas = strategy.num_replicas_in_sync

    def gradients(
        xb: tf.Tensor, yb: tf.Tensor, inv_batch: tf.Tensor, shares: int
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            out = goal.outputs_of(model(xb, training=True))
            loss = tf.reduce_sum(goal.per_example(yb, out)) * inv_batch
            if model.losses:
                loss += tf.add_n([tf.cast(x, tf.float32) for x in model.losses]) / shares
            scaled = optimizer.scale_loss(loss)
        return loss, tape.gradient(scaled, variables)

    if jit and replicas > 1:
        gradients = tf.function(gradients, jit_compile=True, autograph=False)

    def global_inverse(xb: tf.Tensor) -> tf.Tensor:
        return 1.0 / tf.cast(tf.shape(xb)[0] * replicas, tf.float32)

    def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        loss, grads = gradients(xb, yb, global_inverse(xb), replicas)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    def squared_norm(grads: list[tf.Tensor]) -> tf.Tensor:
        unscale = 1.0 / optimizer.scale_loss(tf.constant(1.0))  # loss scaling, if any
        total = tf.add_n([tf.reduce_sum(tf.square(tf.cast(g, tf.float32))) for g in grads])
        return total * unscale * unscale

    def measured_step(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        inv_batch = global_inverse(xb)
        if replicas > 1:  # each replica's gradient is its share of the global mean: R x it
            loss, grads = gradients(xb, yb, inv_batch, replicas)
            total = tf.distribute.get_replica_context().all_reduce(
                tf.distribute.ReduceOp.SUM, grads
            )
            small = squared_norm(grads) * float(replicas * replicas)
            big = squared_norm(total)
        else:  # two micro-batches of B / 2, each twice its share of the global mean
            half = tf.shape(xb)[0] // 2
            loss_a, grads_a = gradients(xb[:half], yb[:half], inv_batch, 2)
            loss_b, grads_b = gradients(xb[half:], yb[half:], inv_batch, 2)
            loss = loss_a + loss_b
            grads = [a + b for a, b in zip(grads_a, grads_b, strict=True)]
            small = 2.0 * (squared_norm(grads_a) + squared_norm(grads_b))
            big = squared_norm(grads)
        optimizer.apply_gradients(zip(grads, variables))
        return loss, tf.stack([small, big])

    def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
        return tf.function(fn, jit_compile=True, autograph=False) if jit and replicas == 1 else fn

    if not noise:
        return compiled(step)
    return MeasuredSteps(
        plain=compiled(step),
        measured=compiled(measured_step),
        counter=lambda: optimizer.iterations,
        every=noise,
        extras=2,
    )
