"""What data a workload loaded (`describe_data`): names, sources, digests that follow the data,
row counts and schemas, for generated arrays, files read into memory and streamed files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from study.workloads.base import Dataset, Streams
from study.workloads.describe import array_digest, data_paths, describe_data
from study.workloads.tabular import TabularWorkload


def arrays(seed: int = 0, rows: int = 50) -> Dataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 4)).astype("float32")
    y = rng.integers(0, 3, rows).astype("int32")
    return Dataset(x[:40], y[:40], x[40:], y[40:], num_classes=3)


def test_generated_arrays_are_named_by_their_changed_options_and_sourced_by_the_full_call():
    workload = TabularWorkload(rows=1500)
    described = describe_data(workload, arrays())

    assert described.name == "tabular(rows=1500)"
    assert described.source == (
        "tabular(features=20, rows=1500, seed=0, task='multiclass', val_fraction=0.2)"
    )
    assert described.source_type == "code"
    assert (described.train_rows, described.val_rows) == (40, 10)
    assert described.schema == (
        ("features", "float32[4]"),
        ("label", "int32[]"),
        ("outputs", "3"),
    )
    assert describe_data(TabularWorkload(), arrays()).name == "tabular"


def test_the_digest_follows_the_data_not_the_workload_or_the_memory_layout():
    data = arrays()
    digest = describe_data(TabularWorkload(), data).digest

    assert len(digest) == 16 and int(digest, 16) >= 0
    assert describe_data(TabularWorkload(rows=999), data).digest == digest  # same arrays
    fortran = Dataset(
        np.asfortranarray(data.x_train), data.y_train, data.x_val, data.y_val, num_classes=3
    )
    assert describe_data(TabularWorkload(), fortran).digest == digest
    changed = data.x_val.copy()
    changed[0, 0] += 1.0
    moved = Dataset(data.x_train, data.y_train, changed, data.y_val, num_classes=3)
    assert describe_data(TabularWorkload(), moved).digest != digest
    assert describe_data(TabularWorkload(), arrays(seed=1)).digest != digest


def test_array_digest_sees_dtype_and_shape():
    values = np.arange(12, dtype="int32")
    assert array_digest(values) != array_digest(values.reshape(3, 4))
    assert array_digest(values) != array_digest(values.astype("int64"))
    assert array_digest(np.array(["a", "b"], dtype=object)) != array_digest(
        np.array(["a", "c"], dtype=object)
    )


def test_data_files_are_options_naming_existing_paths_or_patterns(tmp_path: Path):
    (tmp_path / "a-0.tfrecord").write_bytes(b"x")
    (tmp_path / "a-1.tfrecord").write_bytes(b"y")
    table = tmp_path / "t.csv"
    table.write_text("x,y\n1,0\n")
    options = {"train": str(tmp_path / "a-*.tfrecord"), "label": "y", "path": table, "n": 3}

    assert data_paths(options) == [
        (tmp_path / "a-0.tfrecord").resolve(),
        (tmp_path / "a-1.tfrecord").resolve(),
        table.resolve(),
    ]
    assert data_paths({"path": str(tmp_path / "missing.csv"), "label": "y"}) == []


def streams(rows: int = 80) -> Streams:
    return Streams(
        train=lambda seed, shards, index: None,
        val=lambda: None,
        input_shape=(6,),
        num_classes=2,
        train_examples=rows,
        val_examples=20,
    )


def test_streamed_files_are_sourced_by_path_and_digested_by_size_and_time(tmp_path: Path):
    folder = tmp_path / "images"
    (folder / "cat").mkdir(parents=True)
    picture = folder / "cat" / "1.png"
    picture.write_bytes(b"\x89PNG one")
    workload = TabularWorkload()
    workload._options["path"] = str(folder)  # as a file-backed workload holds it

    described = describe_data(workload, streams())
    assert described.name == "images (tabular)"
    assert (described.source, described.source_type) == (str(folder.resolve()), "local")
    assert (described.train_rows, described.val_rows) == (80, 20)
    assert described.schema == (("features", "float32[6]"), ("outputs", "2"))
    assert describe_data(workload, streams()).digest == described.digest  # stable

    picture.write_bytes(b"\x89PNG two, longer")
    assert describe_data(workload, streams()).digest != described.digest
    again = describe_data(workload, streams()).digest
    stat = picture.stat()
    os.utime(picture, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert describe_data(workload, streams()).digest != again
