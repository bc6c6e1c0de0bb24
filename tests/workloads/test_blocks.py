"""Row-block pipelines (`study.workloads.blocks`): every row once per epoch, a fresh seeded
order per epoch, exact batches spanning blocks and epochs, nothing dropped from an epoch."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from study.workloads.blocks import array_blocks, batches_of, shuffled_rows, windows_of


def ids_of(dataset: tf.data.Dataset) -> list[np.ndarray]:
    return [y.numpy() for _, y in dataset]


def blocks(n: int, rows: int) -> tf.data.Dataset:
    x = np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    return array_blocks(x, np.arange(n, dtype=np.int64), rows)


def test_array_blocks_slice_every_row_in_order() -> None:
    sizes = [len(b) for b in ids_of(blocks(10, 4))]
    assert sizes == [4, 4, 2]
    assert np.concatenate(ids_of(blocks(10, 4))).tolist() == list(range(10))


@pytest.mark.parametrize(("n", "block", "window"), [(10, 3, 4), (10, 4, 20), (12, 5, 5)])
def test_windows_hold_at_least_the_window_and_lose_no_row(n: int, block: int, window: int) -> None:
    windows = ids_of(windows_of(blocks(n, block), window))
    assert np.concatenate(windows).tolist() == list(range(n))
    assert all(len(w) >= window for w in windows[:-1])
    assert all(len(w) > 0 for w in windows)


def test_each_epoch_is_a_fresh_permutation_drawn_from_the_seed() -> None:
    epochs = shuffled_rows(blocks(50, 7), seed=3, window=50).repeat(4)
    ids = np.concatenate(ids_of(epochs)).reshape(4, 50)
    for epoch in ids:
        assert sorted(epoch.tolist()) == list(range(50))
    assert len({tuple(e) for e in ids}) == 4
    again = np.concatenate(ids_of(shuffled_rows(blocks(50, 7), seed=3, window=50).repeat(4)))
    other = np.concatenate(ids_of(shuffled_rows(blocks(50, 7), seed=4, window=50).repeat(4)))
    assert again.tolist() == ids.ravel().tolist()
    assert other.tolist() != again.tolist()


def test_a_small_window_mixes_only_within_itself() -> None:
    windows = ids_of(shuffled_rows(blocks(40, 5), seed=0, window=10))
    assert [sorted(w.tolist()) for w in windows] == [
        list(range(s, s + 10)) for s in (0, 10, 20, 30)
    ]


@pytest.mark.parametrize("batch", [1, 3, 8, 16])
def test_batches_are_exact_and_span_blocks_as_batching_single_rows_does(batch: int) -> None:
    source = blocks(23, 5).repeat(3)
    expected = source.unbatch().batch(batch, drop_remainder=True)
    got = batches_of(source, batch)
    want = ids_of(expected)
    have = ids_of(got)
    assert [len(b) for b in have] == [batch] * len(want)
    assert [b.tolist() for b in have] == [b.tolist() for b in want]
    x, _ = next(iter(got))
    assert x.shape == (batch, 3)
