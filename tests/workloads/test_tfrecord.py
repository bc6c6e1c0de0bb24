"""The tfrecord workload on small files written with tf.io.TFRecordWriter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import study.workloads.tfrecord as tfrecord_module
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.base import Streams
from study.workloads.tfrecord import FeatureSpec, TfrecordWorkload, parse_features

FEATURES = {
    "x": "float32[4]",
    "z": "int64[2]",
    "y": "int64[]",
    "r": "float32[]",
    "tags": "int64[3]",
}
TRAIN_FILES = (30, 25, 0, 20)  # records per training file (one file is empty)
VAL_RECORDS = 15


def record(i: int) -> dict[str, list[float] | list[int]]:
    """Example number ``i``: its values say which example it is."""
    return {
        "x": [i, i + 0.5, -i, 2.0],
        "z": [i % 7, 1],
        "y": [i % 3],
        "r": [3.0 * i + 100.0],
        "tags": [i % 2, int(i % 3 == 0), 1],
    }


def write(path: Path, examples: list[dict[str, list[Any]]]) -> Path:
    import tensorflow as tf

    def feature(values: list[Any]) -> Any:
        if all(isinstance(v, int) for v in values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            features = {k: feature(v) for k, v in example.items()}
            message = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(message.SerializeToString())
    return path


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("records")
    start = 0
    for k, count in enumerate(TRAIN_FILES):
        write(folder / f"train-{k}.tfrecord", [record(i) for i in range(start, start + count)])
        start += count
    write(folder / "val-0.tfrecord", [record(i) for i in range(1000, 1000 + VAL_RECORDS)])
    return folder


@pytest.fixture(autouse=True)
def private_cache(cache_dir: Path) -> Path:
    return cache_dir


def workload(folder: Path, **options: Any) -> TfrecordWorkload:
    made = get_workload(
        "tfrecord",
        {
            "train": str(folder / "train-*.tfrecord"),
            "val": str(folder / "val-*.tfrecord"),
            "features": {"x": FEATURES["x"], "z": FEATURES["z"], "y": FEATURES["y"]},
            "label": "y",
            **options,
        },
    )
    assert isinstance(made, TfrecordWorkload)
    return made


def arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every row of a dataset of row blocks (``Streams.blocks``), concatenated."""
    blocks = [(np.asarray(x), np.asarray(y)) for x, y in dataset]
    return np.concatenate([x for x, _ in blocks]), np.concatenate([y for _, y in blocks])


def sorted_rows(x: np.ndarray) -> np.ndarray:
    return x[np.lexsort(x.T[::-1])]


# --- the spec, without TensorFlow -------------------------------------------------------------


def test_specs_from_a_mapping_or_text() -> None:
    from_text = parse_features("x:float32[4], img:float32[28,28,1];y=int64[]")
    assert from_text == (
        FeatureSpec("x", "float32", (4,)),
        FeatureSpec("img", "float32", (28, 28, 1)),
        FeatureSpec("y", "int64", ()),
    )
    assert parse_features({"x": "float32[4]", "y": "int64[]"})[1].shape == ()
    assert [str(s) for s in from_text] == ["float32[4]", "float32[28,28,1]", "int64[]"]


@pytest.mark.parametrize(
    ("features", "message"),
    [
        (
            {"x": "float[4]", "y": "int64[]"},
            "workload option 'features': feature 'x' must be float32[dims] or int64[dims], "
            "e.g. float32[40] or int64[] (got 'float[4]')",
        ),
        ({"x": "float32[0]", "y": "int64[]"}, "feature 'x' must be float32[dims]"),
        ({"x": "string[]", "y": "int64[]"}, "feature 'x' must be float32[dims]"),
        ("x:float32[4] y", "expected name:dtype[dims] pairs separated by commas"),
        (None, "workload option 'features': give a mapping of feature name to dtype[dims]"),
        ({"y": "int64[]"}, "workload option 'features': besides the label there is no input"),
    ],
)
def test_bad_specs(features: Any, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("tfrecord", {"train": "a", "val": "b", "features": features, "label": "y"})
    assert message in str(excinfo.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"label": "w"}, "workload option 'label': give the feature that holds the label, one "),
        (
            {"label": "x"},
            "workload option 'label': task multiclass needs an int64[] class id; feature 'x' "
            "is float32[4]",
        ),
        ({"task": "binary", "label": "z"}, "task binary needs a 0/1 scalar"),
        ({"task": "regression", "num_classes": 3}, "'num_classes' applies to task multiclass"),
        ({"num_classes": 1}, "workload option 'num_classes' must be an integer >= 2 (got 1)"),
    ],
)
def test_bad_label_options(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        workload(tmp_path, **options)
    assert message in str(excinfo.value)


def test_patterns_must_match_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        workload(tmp_path).validate()
    assert str(excinfo.value) == (
        f"workload option 'train': no file matches {str(tmp_path / 'train-*.tfrecord')!r}"
    )


def test_task_and_targets(tmp_path: Path) -> None:
    assert workload(tmp_path).task.default_target == "val_accuracy>=0.9"
    features = {"x": "float32[4]", "r": "float32[]"}
    regression = workload(tmp_path, features=features, label="r", task="regression")
    assert regression.task.default_target == "val_mse<=0.5"
    assert regression.input_shape == (4,)


# --- reading (TensorFlow) ---------------------------------------------------------------------


def test_streams_parse_count_and_concatenate(data_dir: Path) -> None:
    made = workload(data_dir)
    made.validate()
    streams = made.load()
    assert isinstance(streams, Streams)
    assert streams.train_examples == sum(TRAIN_FILES)
    assert streams.val_examples == VAL_RECORDS
    assert streams.num_classes == 3  # largest class id 2, + 1
    assert streams.input_shape == (6,)  # x (4) then z (2)
    x, y = arrays(streams.val())
    expected = [record(i) for i in range(1000, 1000 + VAL_RECORDS)]
    np.testing.assert_allclose(x, [[*e["x"], *e["z"]] for e in expected])
    assert y.dtype == np.int32 and y.tolist() == [e["y"][0] for e in expected]
    x_train, _ = arrays(streams.train(0, 1, 0))
    written = [[*record(i)["x"], *record(i)["z"]] for i in range(sum(TRAIN_FILES))]
    np.testing.assert_allclose(sorted_rows(x_train), sorted_rows(np.array(written)))


def test_training_order_is_seeded_and_shards_partition(data_dir: Path) -> None:
    streams = workload(data_dir, shuffle_buffer=20).load()
    n = streams.train_examples
    epochs, _ = arrays(streams.train(5, 1, 0).repeat(2))
    first = arrays(streams.train(5, 1, 0))[0]
    np.testing.assert_array_equal(epochs[:n], first)
    assert not np.array_equal(epochs[n:], first)
    assert not np.array_equal(arrays(streams.train(6, 1, 0))[0], first)
    whole = sorted_rows(first)
    for shards in (2, 5):  # 4 files: by file for 2 shards, by record for 5
        parts = [arrays(streams.train(5, shards, i))[0] for i in range(shards)]
        np.testing.assert_array_equal(sorted_rows(np.concatenate(parts)), whole)


def test_regression_and_multilabel_labels(data_dir: Path) -> None:
    features = {"x": "float32[4]", "r": "float32[]", "tags": "int64[3]"}
    regression = workload(data_dir, features=features, label="r", task="regression").load()
    _, y = arrays(regression.train(0, 1, 0))
    assert y.shape == (sum(TRAIN_FILES),) and y.dtype == np.float32
    np.testing.assert_allclose([y.mean(), y.std()], [0.0, 1.0], atol=1e-5)
    multilabel = workload(data_dir, features=features, label="tags", task="multilabel").load()
    assert multilabel.num_classes == 3
    _, tags = arrays(multilabel.val())
    assert tags.shape == (VAL_RECORDS, 3)
    assert tags[:, 2].tolist() == [1.0] * VAL_RECORDS


def test_a_single_input_keeps_its_shape_and_the_model_builds(tmp_path: Path) -> None:
    images = [{"img": list(np.arange(4.0) + i), "y": [i % 2]} for i in range(8)]
    write(tmp_path / "train.tfrecord", images)
    write(tmp_path / "val.tfrecord", images[:3])
    made = get_workload(
        "tfrecord",
        {
            "train": str(tmp_path / "train.tfrecord"),
            "val": str(tmp_path / "val.tfrecord"),
            "features": "img:float32[2,2,1],y:int64[]",
            "label": "y",
            "num_classes": 4,
        },
    )
    streams = made.load()
    assert streams.input_shape == (2, 2, 1) and streams.num_classes == 4
    x, _ = arrays(streams.val())
    np.testing.assert_array_equal(x[1, :, :, 0], [[1.0, 2.0], [3.0, 4.0]])
    net = made.build_model("mlp", streams)
    assert np.asarray(net(x)).shape == (3, 4)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            {"x": [1.0, 2.0, 3.0], "z": [1, 1], "y": [0]},
            "feature 'x' has 3 float value(s) in its first record, but the spec float32[4] needs 4",
        ),
        (
            {"x": [1.0, 2.0, 3.0, 4.0], "y": [0]},
            "feature 'z' is missing from its first record (found: x, y)",
        ),
        (
            {"x": [1, 2, 3, 4], "z": [1, 1], "y": [0]},
            "feature 'x' holds 4 int64 value(s) in its first record, but the spec says float32[4]",
        ),
    ],
)
def test_first_record_mismatch_names_file_feature_and_finding(
    data_dir: Path, tmp_path: Path, bad: dict, problem: str
) -> None:
    path = write(tmp_path / "val-bad.tfrecord", [bad])
    made = workload(data_dir, val=str(path))
    with pytest.raises(UsageError) as excinfo:
        made.load()
    assert str(excinfo.value) == f"workload option 'features': {path}: {problem}"


def test_a_later_bad_record_is_found_by_the_counting_pass(data_dir: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "val-late.tfrecord", [record(0), {"x": [1.0], "z": [1, 1], "y": [0]}])
    with pytest.raises(UsageError) as excinfo:
        workload(data_dir, val=str(path)).load()
    assert str(excinfo.value) == (
        f"workload option 'features': {path}: feature 'x' has 1 float value(s) in record 2, "
        "but the spec float32[4] needs 4"
    )


def test_binary_label_out_of_range(data_dir: Path) -> None:
    with pytest.raises(UsageError) as excinfo:
        workload(data_dir, task="binary").load()  # y is 0, 1 or 2
    assert str(excinfo.value).endswith("label 'y' holds 2; task binary needs 0 or 1")


def test_counts_are_cached(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = workload(data_dir).load()

    def fail(*args: object) -> None:
        raise AssertionError("counted again")

    monkeypatch.setattr(tfrecord_module, "counting_pass", fail)
    again = workload(data_dir).load()
    assert (again.train_examples, again.num_classes) == (first.train_examples, 3)


def test_a_file_that_is_not_a_tfrecord(data_dir: Path, tmp_path: Path) -> None:
    junk = tmp_path / "val-junk.tfrecord"
    junk.write_bytes(b"these bytes are not a TFRecord file at all")
    with pytest.raises(UsageError) as excinfo:
        workload(data_dir, val=str(junk)).load()
    assert str(excinfo.value).startswith(
        f"workload option 'val': {junk} is not a TFRecord file (corrupted record at 0"
    )
