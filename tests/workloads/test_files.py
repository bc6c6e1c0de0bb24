"""Shared pieces of the file workloads: the row-hash split, chunked statistics, cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from study.workloads.files import (
    RunningStats,
    cached_json,
    fingerprint,
    stratified_split,
    tf_val_rows,
    val_rows,
)


def test_hash_split_fraction_and_seed() -> None:
    rows = np.arange(100_000)
    mask = val_rows(rows, seed=0, val_fraction=0.2)
    assert 0.195 < mask.mean() < 0.205
    assert np.array_equal(val_rows(rows, 0, 0.2), mask)
    other = val_rows(rows, 1, 0.2)
    assert 0.15 < (other != mask).mean() < 0.5  # another seed, another (independent) split
    # a row's side does not depend on what else is in the file: chunks agree with the whole
    parts = [val_rows(chunk, 0, 0.2) for chunk in np.array_split(rows, 7)]
    assert np.array_equal(np.concatenate(parts), mask)
    # a larger fraction only adds validation rows
    assert (val_rows(rows, 0, 0.3) >= mask).all()


def test_hash_split_is_the_same_in_tensorflow() -> None:
    import tensorflow as tf

    rows = np.concatenate([np.arange(50_000), [2**31, 2**32 + 5, 10**12]])
    for seed in (0, 7, 2**40 + 3):
        expected = val_rows(rows, seed, 0.25)
        got = tf_val_rows(tf, tf.constant(rows, tf.int64), seed, 0.25).numpy()
        np.testing.assert_array_equal(got, expected)


def test_running_stats_equal_the_whole_array() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(1e6, 3.0, size=(5000, 4))  # a large offset: naive sums would lose digits
    x[:, 3] = 2.5  # a constant column
    stats = RunningStats()
    for chunk in np.array_split(x, 13):
        stats.update(chunk)
    stats.update(np.zeros((0, 4)))
    assert stats.count == 5000
    np.testing.assert_allclose(stats.mean, x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats.std[:3], x.std(axis=0)[:3], rtol=1e-9)
    assert stats.std[3] == 1.0


def test_stratified_split_keeps_class_shares() -> None:
    labels = np.repeat([0, 1, 2], [50, 30, 20])
    train, val = stratified_split(labels, 100, 0.2, seed=4)
    assert np.bincount(labels[val]).tolist() == [10, 6, 4]
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(100))
    again = stratified_split(labels, 100, 0.2, seed=4)
    assert np.array_equal(again[1], val)
    train, val = stratified_split(None, 10, 0.3, seed=0)
    assert len(val) == 3 and len(train) == 7


def test_cached_json_computes_once_per_key(cache_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(b"12345")
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"rows": 5}

    key = fingerprint([data], task="binary")
    assert cached_json("test", key, compute) == {"rows": 5}
    assert cached_json("test", key, compute) == {"rows": 5}
    assert len(calls) == 1
    assert [p.name for p in cache_dir.iterdir()] == [f"test-{key}.json"]  # no temp files left
    assert json.loads((cache_dir / f"test-{key}.json").read_text()) == {"rows": 5}
    data.write_bytes(b"123456")  # the file changed: another key
    assert fingerprint([data], task="binary") != key
    assert fingerprint([data], task="regression") != fingerprint([data], task="binary")
