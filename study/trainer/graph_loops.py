"""Graph loops written out as `tf.while_loop` and `tf.cond`, for functions traced without AutoGraph.

The trainer's compiled functions (the multi-step training call, the evaluation fold, the
iterator skip) are traced with ``autograph=False``: AutoGraph rewrote their Python source on
every new worker process, which cost about 1.3 of the 2.1 CPU-seconds of a tiny first trial on
this machine (`benchmarks/trial_start.py`). Its loops are these few, so they are spelled out:
the same `tf.while_loop` and `tf.cond` AutoGraph builds (a range loop with its trip count as
``maximum_iterations``; an iterator loop on ``get_next_as_optional``), so the arithmetic and the
order of the steps are unchanged.

A loop's state is any nested structure of tensors and `tf.TensorArray`s; the body returns the
same structure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import tensorflow as tf

__all__ = ["for_each", "for_range", "while_true"]

State = TypeVar("State")


def for_range(count: tf.Tensor, body: Callable[[tf.Tensor, State], State], state: State) -> State:
    """``for i in range(count): state = body(i, state)`` as one graph loop (``i`` has
    ``count``'s integer dtype)."""
    count = tf.convert_to_tensor(count)
    start = tf.zeros([], count.dtype)
    _, state = tf.while_loop(
        lambda i, _: i < count,
        lambda i, s: (i + 1, body(i, s)),
        (start, state),
        maximum_iterations=tf.cast(tf.maximum(count, 0), tf.int32),
    )
    return state


def while_true(
    test: Callable[[State], tf.Tensor], body: Callable[[State], State], state: State
) -> State:
    """``while test(state): state = body(state)`` as one graph loop."""
    return tf.while_loop(test, lambda s: (body(s),), (state,))[0]


def for_each(iterator: Any, body: Callable[[Any, State], State], state: State) -> State:
    """``for element in iterator: state = body(element, state)`` as one graph loop over a
    `tf.data` iterator, ending when it has no next element."""

    def step(more: tf.Tensor, s: State) -> tuple[tf.Tensor, State]:
        del more
        element = iterator.get_next_as_optional()
        has = element.has_value()
        return has, tf.cond(has, lambda: body(element.get_value(), s), lambda: s)

    _, state = tf.while_loop(lambda more, _: more, step, (tf.constant(True), state))
    return state
