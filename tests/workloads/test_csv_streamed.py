"""The streamed csv path: one pandas pass, then tf.data; the same split and statistics as in
memory, deterministic for a seed, shards that partition the training rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import study.workloads.csv as csv_module
import study.workloads.csv_scan as scan_module
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.base import Dataset, Streams
from study.workloads.csv import CsvWorkload

ROWS = 3000


LABELS = {"multiclass": "animal", "binary": "flag", "regression": "price"}


def write_table(path: Path, task: str = "multiclass", rows: int = ROWS) -> Path:
    """Three features on different scales and one label column for ``task``: a text class, a
    two-valued number or a real number."""
    rng = np.random.default_rng(5)
    a = rng.normal(100.0, 20.0, rows)
    b = rng.uniform(-1.0, 1.0, rows)
    c = rng.integers(0, 5, rows)
    labels = {
        "multiclass": [
            ("cat", "dog", "bird")[int(b[i] > 0) + int(a[i] > 110)] for i in range(rows)
        ],
        "binary": [7 if a[i] > 100 else 3 for i in range(rows)],
        "regression": [f"{a[i] * 2 + b[i]:.4f}" for i in range(rows)],
    }[task]
    lines = [f"a,{LABELS[task]},b,c"]
    lines += [f"{a[i]:.6f},{labels[i]},{b[i]:.6f},{c[i]}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def workload(path: Path, **options: Any) -> CsvWorkload:
    made = get_workload("csv", {"path": str(path), "chunk_rows": 700, **options})
    assert isinstance(made, CsvWorkload)
    return made


def arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every row of a dataset of row blocks (``Streams.blocks``), concatenated."""
    blocks = [(np.asarray(x), np.asarray(y)) for x, y in dataset]
    return np.concatenate([x for x, _ in blocks]), np.concatenate([y for _, y in blocks])


def by_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Rows (features and label) in a canonical order, to compare as sets."""
    table = np.column_stack([x, y.reshape(len(y), -1)])
    return table[np.lexsort(table.T[::-1])]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("csv")
    return {task: write_table(folder / f"{task}.csv", task) for task in LABELS}


@pytest.fixture
def table(tables: dict[str, Path]) -> Path:
    return tables["multiclass"]


@pytest.fixture(autouse=True)
def private_cache(cache_dir: Path) -> Path:
    return cache_dir


@pytest.mark.parametrize("task", sorted(LABELS))
def test_streamed_equals_in_memory_with_the_hash_split(tables: dict[str, Path], task: str) -> None:
    path, label = tables[task], LABELS[task]
    streamed = workload(path, label=label, task=task, streamed=True)
    in_memory = workload(path, label=label, task=task, split="hash")
    streams, data = streamed.load(), in_memory.load()
    assert isinstance(streams, Streams) and isinstance(data, Dataset)
    assert streams.num_classes == data.num_classes
    assert streams.input_shape == data.input_shape == (3,)
    assert (streams.train_examples, streams.val_examples) == (len(data.y_train), len(data.y_val))
    assert streams.train_examples + streams.val_examples == ROWS

    s, m = streamed.stats, in_memory.stats
    assert s is not None and m is not None
    assert (s.rows, s.train_rows, s.val_rows, s.class_names) == (
        m.rows,
        m.train_rows,
        m.val_rows,
        m.class_names,
    )
    np.testing.assert_allclose(s.feature_mean, m.feature_mean, rtol=1e-10)
    np.testing.assert_allclose(s.feature_std, m.feature_std, rtol=1e-10)
    np.testing.assert_allclose(s.label_mean, m.label_mean, rtol=1e-10)
    np.testing.assert_allclose(s.label_std, m.label_std, rtol=1e-10)

    x_val, y_val = arrays(streams.val())  # file order, every validation row once
    assert x_val.dtype == np.float32 and y_val.dtype == data.y_val.dtype
    np.testing.assert_allclose(x_val, data.x_val, atol=1e-5)
    np.testing.assert_allclose(y_val, data.y_val, atol=1e-5)
    x_train, y_train = arrays(streams.train(3, 1, 0))
    np.testing.assert_allclose(
        by_rows(x_train, y_train), by_rows(data.x_train, data.y_train), atol=1e-5
    )


def test_train_order_is_seeded_and_reshuffled_each_epoch(table: Path) -> None:
    streams = workload(table, label="animal", streamed=True, shuffle_buffer=500).load()
    assert isinstance(streams, Streams)
    first, _ = arrays(streams.train(11, 1, 0))
    again, _ = arrays(streams.train(11, 1, 0))
    other, _ = arrays(streams.train(12, 1, 0))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    n = streams.train_examples
    two_epochs, _ = arrays(streams.train(11, 1, 0).repeat(2))
    np.testing.assert_array_equal(two_epochs[:n], first)
    assert not np.array_equal(two_epochs[n:], first)
    np.testing.assert_array_equal(by_rows(two_epochs[n:], np.zeros(n)), by_rows(first, np.zeros(n)))


def test_shards_partition_the_training_rows(tables: dict[str, Path]) -> None:
    streams = workload(tables["regression"], label="price", task="regression", streamed=True)
    streams = streams.load()
    assert isinstance(streams, Streams)
    whole = by_rows(*arrays(streams.train(4, 1, 0)))
    parts = [arrays(streams.train(4, 3, i)) for i in range(3)]
    assert all(abs(len(y) - len(whole) / 3) < 0.1 * len(whole) for _, y in parts)
    joined = by_rows(np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts]))
    np.testing.assert_array_equal(joined, whole)  # together all rows, each exactly once


# --- without TensorFlow -----------------------------------------------------------------------


def test_large_files_stream_automatically(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not workload(table, label="animal").streamed
    monkeypatch.setattr(csv_module, "STREAM_BYTES", table.stat().st_size - 1)
    assert workload(table, label="animal").streamed
    assert workload(table, label="animal").split == "hash"
    assert not workload(table, label="animal", streamed="false").streamed
    assert not workload(table, label="animal", text_column="b").streamed  # text mode
    with pytest.raises(UsageError, match=r"^workload option 'split': multiclass.csv is larger"):
        workload(table, label="animal", split="stratified").validate()


def test_bad_value_after_the_checked_head_is_found_by_the_pass(tmp_path: Path) -> None:
    path = write_table(tmp_path / "late.csv", rows=1500)
    lines = path.read_text().splitlines()
    fields = lines[1400].split(",")
    fields[0] = "twelve"
    lines[1400] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    streamed = workload(path, label="animal", streamed=True)
    streamed.validate()  # the first 1,000 rows are fine
    with pytest.raises(UsageError) as excinfo:
        streamed.load()
    assert str(excinfo.value) == (
        "workload option 'path': column 'a' in late.csv is not numeric (data row 1400: 'twelve'); drop it, "
        "or make it the text column if it holds the text to classify"
    )


def test_the_pass_is_cached(tables: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    table = tables["binary"]
    first = workload(table, label="flag", task="binary", streamed=True)
    first.load()

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("scanned again")

    monkeypatch.setattr(csv_module, "scan", fail)
    again = workload(table, label="flag", task="binary", streamed=True)
    again.load()
    assert again.stats == first.stats
    assert again.class_names == (3, 7)
    with pytest.raises(AssertionError, match="scanned again"):  # other options, other pass
        workload(table, label="flag", task="binary", streamed=True, seed=1).load()


def test_too_many_streamed_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "MAX_STREAMED_CLASSES", 50)
    path = tmp_path / "ids.csv"
    path.write_text("x,id\n" + "".join(f"{i},{i}\n" for i in range(100)))
    with pytest.raises(UsageError, match=r"column 'id' in ids.csv has more than 50 values"):
        workload(path, label="id", streamed=True).load()
