"""Exact steps' replay in one compiled call: a training step, then an evaluation, per step.

When an evaluation meets the target after steps nobody looked at, the trainer goes back to the
last evaluation that did not and looks at every step in between (`study.trainer.loop`). Two
compiled calls a step (one step, then the evaluation) cost about 0.9 ms on the MNIST-1D MLP,
most of it the calls themselves; `Replayer` runs a range of such steps in one call, a graph
loop whose body calls the session's own compiled step and evaluation (the same functions, so
the same arithmetic: the tests compare the curves bit for bit), about 0.6 ms a step.

It serves data in memory on one host without the noise scale's statistics (`replayer`);
anything else replays one call at a time, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from study.trainer.graph_loops import for_range
from study.trainer.inputs import ArrayFeed
from study.trainer.session import Session

__all__ = ["Replayer", "replayer"]


@dataclass(frozen=True)
class Replayer:
    """A session's compiled replay: [steps, batch] indices -> each step's loss and the metrics
    of the evaluation after it (in ``keys`` order)."""

    function: Any
    keys: tuple[str, ...]

    def run(self, args: tuple) -> tuple[np.ndarray, list[dict[str, float]]]:
        """Train and evaluate each step of ``args`` (`Session.args`): the losses and, per step,
        the metrics `Session.evaluate` would give."""
        losses, rows = self.function(*args)
        metrics = [
            {k: float(v) for k, v in zip(self.keys, row, strict=True)} for row in rows.numpy()
        ]
        return losses.numpy(), metrics


def replayer(session: Session) -> Replayer | None:
    """The session's `Replayer`, traced on first use; None where it does not apply (streamed
    data, steps that measure the noise scale) or cannot be traced."""
    if session.replayer is None:
        session.replayer = _trace(session) or False
    return session.replayer or None


def _trace(session: Session) -> Replayer | None:
    if not isinstance(session.feed, ArrayFeed):
        return None
    chunk, evaluate = session.train_chunk, session.evaluate_function
    if not isinstance(chunk.structured_outputs, tf.Tensor):  # (losses, statistics)
        return None
    dtype = evaluate.structured_outputs.dtype

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def replay(indices: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        count = tf.shape(indices)[0]

        def step(i: tf.Tensor, state: Any) -> Any:
            losses, rows = state
            loss = chunk(indices[i : i + 1])
            with tf.control_dependencies([loss]):  # evaluate the weights this step made
                values = evaluate()
            return losses.write(i, loss[0]), rows.write(i, values)

        start = (tf.TensorArray(tf.float32, size=count), tf.TensorArray(dtype, size=count))
        losses, rows = for_range(count, step, start)
        return losses.stack(), rows.stack()

    try:
        return Replayer(replay.get_concrete_function(), tuple(session.evaluator.keys))
    except Exception:  # a model or metric that does not trace inside a loop: one call a step
        return None
