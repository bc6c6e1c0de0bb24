"""The images workload on small PNG/JPEG/GIF/BMP files written into tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from study.config.target import Target
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.base import Dataset, Streams
from study.workloads.images import ImagesWorkload, list_images

CLASSES = ("circle", "square", "stripes")
PER_CLASS = 10


def picture(kind: str, index: int, size: int = 8) -> np.ndarray:
    """An RGB uint8 image whose pixels say which class and which picture it is."""
    rng = np.random.default_rng(index)
    base = {"circle": (200, 30, 30), "square": (30, 200, 30), "stripes": (30, 30, 200)}[kind]
    pixels = np.array(base, np.int32) + rng.integers(-20, 20, size=(size, size, 3))
    pixels[0, 0] = (index, index, index)  # one marker pixel: which picture this is
    return pixels.clip(0, 255).astype(np.uint8)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three class folders of ten 8x8 PNGs; one class also has a JPEG, a GIF and a BMP in a
    sub-folder; a text file and a hidden file that are not images."""
    root = tmp_path / "pictures"
    for kind in CLASSES:
        (root / kind).mkdir(parents=True)
        for i in range(PER_CLASS):
            Image.fromarray(picture(kind, i)).save(root / kind / f"{i:02d}.png")
    extra = root / "stripes" / "more"
    extra.mkdir()
    Image.fromarray(picture("stripes", 50, size=16)).save(extra / "a.JPG")
    Image.fromarray(picture("stripes", 51, size=5)).save(extra / "b.gif")
    Image.fromarray(picture("stripes", 52)).save(extra / "c.bmp")
    (root / "stripes" / "notes.txt").write_text("not an image")
    (root / "circle" / ".hidden.png").write_bytes(b"")
    return root


def images(path: Path, **options: Any) -> ImagesWorkload:
    workload = get_workload("images", {"path": str(path), **options})
    assert isinstance(workload, ImagesWorkload)
    return workload


def arrays(dataset: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = dataset.batch(1000).get_single_element()
    return np.asarray(x), np.asarray(y)


# --- without TensorFlow -----------------------------------------------------------------------


def test_classes_are_sorted_folders_and_images_are_found(folder: Path) -> None:
    files = list_images(folder)
    assert files.classes == CLASSES
    names = [Path(p).relative_to(folder).as_posix() for p in files.paths]
    assert len(names) == 3 * PER_CLASS + 3
    assert "stripes/more/a.JPG" in names and "stripes/more/b.gif" in names
    assert "stripes/more/c.bmp" in names
    assert not any(n.endswith((".txt", ".hidden.png")) for n in names)
    assert np.bincount(files.labels).tolist() == [10, 10, 13]
    assert names == sorted(names)


def test_split_is_stratified_seeded_and_disjoint(folder: Path) -> None:
    first = images(folder, val_fraction=0.3)
    train, val = first._split()
    assert np.bincount(val.labels).tolist() == [3, 3, 4]
    assert not set(train.paths) & set(val.paths)
    assert len(train.paths) + len(val.paths) == 33
    assert val.paths == tuple(sorted(val.paths))  # fixed order
    assert images(folder, val_fraction=0.3)._split()[1].paths == val.paths
    assert images(folder, val_fraction=0.3, seed=1)._split()[1].paths != val.paths


def test_task_and_targets(folder: Path) -> None:
    workload = images(folder)
    assert workload.task.default_target == "val_accuracy>=0.9"
    assert workload.check_model(None) == "cnn"
    binary = images(folder, task="binary")
    assert binary.metrics == ("val_loss", "val_accuracy", "val_error", "val_auc")
    binary.check_target(Target.parse("val_auc>=0.9"))
    with pytest.raises(UsageError) as excinfo:
        binary.validate()
    assert str(excinfo.value) == (
        f"workload option 'task': binary needs exactly two class folders; {str(folder)!r} has "
        "3 (circle, square, stripes); use task=multiclass"
    )


def _error(path: Path) -> str:
    with pytest.raises(UsageError) as excinfo:
        images(path).validate()
    return str(excinfo.value)


def test_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "nothing"
    assert _error(path) == f"workload option 'path': no such directory {str(path)!r}"


def test_a_file_is_not_a_directory(tmp_path: Path) -> None:
    path = tmp_path / "x.png"
    path.write_bytes(b"")
    assert _error(path).startswith(f"workload option 'path': {str(path)!r} is a file")


def test_fewer_than_two_class_folders(tmp_path: Path) -> None:
    (tmp_path / "cats").mkdir()
    assert _error(tmp_path) == (
        f"workload option 'path': {str(tmp_path)!r} needs at least two class folders (found "
        "only 'cats'); put each class's images in its own sub-folder"
    )


def test_class_folder_without_images(folder: Path) -> None:
    (folder / "empty").mkdir()
    (folder / "empty" / "readme.txt").write_text("no pictures")
    assert _error(folder) == (
        f"workload option 'path': class folder {str(folder / 'empty')!r} has no images "
        "(.png, .jpg, .jpeg, .bmp, .gif); add some or remove the folder"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"channels": 4}, "workload option 'channels' must be 1 or 3 (got 4)"),
        ({"image_size": 2}, "workload option 'image_size' must be an integer >= 4 (got 2)"),
        ({"streamed": "sometimes"}, "workload option 'streamed' must be true or false"),
        ({"task": "regression"}, "workload option 'task' must be one of multiclass, binary"),
        ({"path": None}, "workload option 'path': the images workload needs a directory"),
    ],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("images", {"path": "somewhere", **options})
    assert str(excinfo.value).startswith(message)


# --- decoding (TensorFlow) --------------------------------------------------------------------


def test_validation_images_are_decoded_in_a_fixed_order(folder: Path) -> None:
    workload = images(folder, image_size=8)
    streams = workload.load()
    assert isinstance(streams, Streams)
    assert streams.input_shape == (8, 8, 3) and streams.num_classes == 3
    _, val = workload._split()
    x, y = arrays(streams.val())
    assert x.shape == (streams.val_examples, 8, 8, 3) and x.dtype == np.float32
    assert y.tolist() == val.labels.tolist()
    assert x.min() >= 0.0 and x.max() <= 1.0
    for image, path in zip(x, val.paths):  # 8x8 PNGs are not resized: exact pixels / 255
        if path.endswith(".png"):
            expected = np.asarray(Image.open(path), np.float32) / 255.0
            np.testing.assert_allclose(image, expected, atol=1e-6)
    again, _ = arrays(streams.val())
    np.testing.assert_array_equal(again, x)


def test_training_files_shuffle_per_epoch_and_shards_partition(folder: Path) -> None:
    streams = images(folder, image_size=6, channels=1).load()
    assert isinstance(streams, Streams)
    n = streams.train_examples
    x, _ = arrays(streams.train(3, 1, 0).repeat(2))
    assert x.shape == (2 * n, 6, 6, 1)
    first, second = x[:n], x[n:]
    np.testing.assert_array_equal(arrays(streams.train(3, 1, 0))[0], first)  # seeded
    assert not np.array_equal(first, second)  # another order the next epoch
    key = lambda a: sorted(map(bytes, a))  # noqa: E731 - images compared as a set
    assert key(first) == key(second)
    shards = [arrays(streams.train(3, 2, i))[0] for i in range(2)]
    assert sorted(len(s) for s in shards) == [n // 2, n - n // 2]
    assert key(np.concatenate(shards)) == key(first)
    x_val, _ = arrays(streams.val())  # grey from every format (GIF and BMP decode as RGB first)
    assert x_val.shape == (streams.val_examples, 6, 6, 1)


def test_in_memory_equals_streamed(folder: Path) -> None:
    data = images(folder, image_size=4, streamed=False).load()
    streams = images(folder, image_size=4).load()
    assert isinstance(data, Dataset) and isinstance(streams, Streams)
    assert data.input_shape == streams.input_shape == (4, 4, 3)
    x_val, y_val = arrays(streams.val())
    np.testing.assert_array_equal(data.x_val, x_val)
    np.testing.assert_array_equal(data.y_val, y_val)
    assert data.y_train.dtype == np.int32 and len(data.y_train) == streams.train_examples


@pytest.mark.parametrize("model", ["cnn", "resnet"])
def test_models_give_one_logit_per_class(folder: Path, model: str) -> None:
    import keras

    workload = images(folder, image_size=8, streamed=False)
    data = workload.load()
    net = workload.build_model(model, data)
    assert np.asarray(net(data.x_val[:2])).shape == (2, 3)
    kinds = {type(layer).__name__ for layer in net.layers}
    if model == "resnet":
        assert {"BatchNormalization", "Add", "GlobalAveragePooling2D"} <= kinds
        norms = [layer for layer in net.layers if type(layer).__name__ == "BatchNormalization"]
        assert all(layer.synchronized for layer in norms)  # mirrored:N == default
        assert net.count_params() < 100_000
        assert isinstance(net, keras.Model)
    else:
        assert "BatchNormalization" not in kinds
