"""Tests for study.trainer.graph_loops: the spelled-out loops match their Python meaning."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from study.trainer.graph_loops import for_each, for_range, while_true


def graph(fn):
    """``fn`` traced as the trainer traces its functions: no AutoGraph."""
    return tf.function(fn, autograph=False)


@pytest.mark.parametrize("count", [0, 1, 7])
def test_for_range_runs_its_body_count_times_in_order(count: int) -> None:
    @graph
    def squares(n: tf.Tensor) -> tf.Tensor:
        out = tf.TensorArray(tf.int32, size=n)
        return for_range(n, lambda i, ta: ta.write(i, i * i), out).stack()

    assert squares(tf.constant(count)).numpy().tolist() == [i * i for i in range(count)]


def test_for_range_keeps_an_int64_count_and_nested_state() -> None:
    @graph
    def sums(n: tf.Tensor) -> dict[str, tf.Tensor]:
        start = {"total": tf.zeros([], tf.int64), "steps": tf.zeros([], tf.int32)}
        return for_range(n, lambda i, s: {"total": s["total"] + i, "steps": s["steps"] + 1}, start)

    out = sums(tf.constant(5, tf.int64))
    assert (int(out["total"]), int(out["steps"])) == (10, 5)


def test_while_true_stops_at_the_first_false_test() -> None:
    @graph
    def collatz(n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def step(s: tuple[tf.Tensor, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
            x, steps = s
            return tf.where(x % 2 == 0, x // 2, 3 * x + 1), steps + 1

        return while_true(lambda s: s[0] > 1, step, (n, tf.constant(0)))

    x, steps = collatz(tf.constant(27))
    assert (int(x), int(steps)) == (1, 111)  # 27 reaches 1 after 111 steps


@pytest.mark.parametrize("rows", [0, 1, 10])
def test_for_each_visits_every_element_of_an_iterator_once(rows: int) -> None:
    data = tf.data.Dataset.range(rows).batch(3)  # a short last batch

    @graph
    def total() -> tuple[tf.Tensor, tf.Tensor]:
        return for_each(
            iter(data),
            lambda batch, s: (s[0] + tf.reduce_sum(batch), s[1] + 1),
            (tf.zeros([], tf.int64), tf.constant(0)),
        )

    summed, batches = total()
    assert int(summed) == sum(range(rows))
    assert int(batches) == int(np.ceil(rows / 3))
