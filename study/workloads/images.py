"""A directory of images in class folders: ``path/cat/1.png``, ``path/dog/7.jpg``, ...

Class names are the sorted sub-folder names (class id = position); a class folder's images
are the files below it (sub-folders included, hidden files skipped) ending in .png, .jpg,
.jpeg, .bmp or .gif (first frame). The split is seeded and stratified: about ``val_fraction``
of each class goes to validation. Images are decoded with ``tf.io.decode_image``, resized
(bilinear) to ``image_size`` x ``image_size`` with ``channels`` channels (1: grey, 3: RGB) and
scaled to [0, 1].

By default (``streamed: true``) decoding happens in ``tf.data``: each epoch shuffles this
shard's training file names (seeded, reshuffled every epoch) and decodes them in a
deterministic parallel map; validation reads its files in a fixed order (class, then path).
``streamed: false`` decodes every image once into memory (fast for small folders).

Example::

    ImagesWorkload(path="flowers", image_size=64, channels=3)   # models: cnn, resnet
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from study.paths import exists
from study.workloads.base import Dataset, Streams, Workload
from study.workloads.files import stratified_split
from study.workloads.options import Option, boolean, integer, number, option_error, tasks
from study.workloads.task import Task, TaskKind

if TYPE_CHECKING:  # pragma: no cover
    import keras

__all__ = ["IMAGE_SUFFIXES", "ImageFiles", "ImagesWorkload", "check_signatures", "list_images"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
_THREE_CHANNELS_ONLY = (".bmp", ".gif")  # decode_image refuses channels=1 for these


@dataclass(frozen=True)
class ImageFiles:
    """The images of a folder: class names, and per image its path and class id."""

    classes: tuple[str, ...]
    paths: tuple[str, ...]
    labels: np.ndarray

    def take(self, indices: np.ndarray) -> ImageFiles:
        return ImageFiles(self.classes, tuple(self.paths[i] for i in indices), self.labels[indices])


def list_images(root: str | os.PathLike[str]) -> ImageFiles:
    """The class folders of ``root`` and their images, in sorted order (os only, no TensorFlow).

    Raises:
        FieldError: on option ``path``: missing directory, fewer than two class folders, a class
            folder without images.
    """
    folder = Path(root).expanduser()
    if not exists(folder):
        raise option_error("path", "", detail=f"no such directory {str(root)!r}")
    if not folder.is_dir():
        raise option_error(
            "path",
            "",
            detail=f"{str(root)!r} is a file; give the directory that holds "
            "one sub-folder per class",
        )
    classes = sorted(
        entry.name for entry in folder.iterdir() if entry.is_dir() and not _hidden(entry.name)
    )
    if len(classes) < 2:
        found = f"only {classes[0]!r}" if classes else "none"
        raise option_error(
            "path",
            "",
            detail=f"{str(root)!r} needs at least two class folders (found "
            f"{found}); put each class's images in its own sub-folder",
        )
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        images = _images_below(folder / name)
        if not images:
            raise option_error(
                "path",
                "",
                detail=f"class folder {str(folder / name)!r} has no images "
                f"({', '.join(IMAGE_SUFFIXES)}); add some or remove the folder",
            )
        paths += images
        labels += [label] * len(images)
    return ImageFiles(tuple(classes), tuple(paths), np.asarray(labels, dtype=np.int32))


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _images_below(folder: Path) -> list[str]:
    """Image files below ``folder`` (recursively, following links), sorted by path."""
    found = []
    for top, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        for name in sorted(names):
            if not _hidden(name) and name.lower().endswith(IMAGE_SUFFIXES):
                found.append(os.path.join(top, name))
    return found


class ImagesWorkload(Workload):
    """Classify the images of a folder by their class sub-folder; models ``cnn`` and ``resnet``.

    Options: ``path`` (the folder), ``image_size`` (32), ``channels`` (3; or 1), ``val_fraction``
    (0.2), ``seed`` (0), ``streamed`` (true), ``task`` (``multiclass``, or ``binary`` with
    exactly two class folders: the second in sorted order is the positive class).
    """

    name: ClassVar[str] = "images"
    models: ClassVar[tuple[str, ...]] = ("cnn", "resnet")
    default_target: ClassVar[str] = "val_accuracy>=0.9"

    option_specs: ClassVar[dict[str, Option]] = {
        "path": Option(None, lambda name, value: _path_option(name, value)),
        "image_size": Option(32, integer(minimum=4)),
        "channels": Option(3, lambda name, value: _channels_option(name, value)),
        "val_fraction": Option(0.2, number(low=0.0, high=1.0)),
        "seed": Option(0, integer()),
        "streamed": Option(True, boolean()),
        "task": Option("multiclass", tasks(TaskKind.MULTICLASS, TaskKind.BINARY)),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.class_names: tuple[str, ...] = ()

    @property
    def task(self) -> Task:
        """Multi-class (``val_accuracy>=0.9``) or binary (one logit, ``val_auc>=0.9``)."""
        if self.options["task"] == TaskKind.BINARY.value:
            return Task.binary("val_auc>=0.9")
        return Task.multiclass(self.default_target)

    def validate(self) -> None:
        """List the folder and split it (no TensorFlow, no image is opened)."""
        self._split()

    def load(self) -> Dataset | Streams:
        """`Streams` decoding in ``tf.data``, or (``streamed: false``) every image in memory.
        Every file must start as an image of its kind does (`check_signatures`); in memory, an
        image that does not decode is named."""
        train, val = self._split()
        check_signatures(train.paths + val.paths)
        streams = self._streams(train, val)
        if self.options["streamed"]:
            return streams
        x_train, y_train = _arrays(self._decoded(train), train.paths)
        x_val, y_val = _arrays(streams.val(), val.paths)
        return Dataset(x_train, y_train, x_val, y_val, num_classes=streams.num_classes)

    def build_model(self, model: str, data: Dataset | Streams) -> keras.Model:
        """``cnn``: three 3x3 conv layers (16, 32, 64; max-pool between) -> global average
        pooling -> Dense(outputs). ``resnet``: a stem conv (16) and three residual blocks
        (16, 32/2, 64/2; conv-BN-ReLU-conv-BN plus a skip, 1x1 conv when the shape changes)
        -> global average pooling -> Dense(outputs), 78,714 weights for 10 classes. Its BatchNorm is
        synchronised: batch statistics over the global batch, so ``mirrored:N`` computes what
        ``default`` does (validation loss equal to 1e-6 after 20 steps here)."""
        import keras

        model = self.check_model(model)
        inputs = keras.Input(shape=data.input_shape)
        if model == "resnet":
            x = _conv_bn(inputs, 16, stride=1, relu=True)
            for filters, stride in ((16, 1), (32, 2), (64, 2)):
                x = _residual_block(x, filters, stride)
        else:
            x = inputs
            for i, filters in enumerate((16, 32, 64)):
                if i:
                    x = keras.layers.MaxPooling2D()(x)
                x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
        x = keras.layers.GlobalAveragePooling2D()(x)
        outputs = keras.layers.Dense(data.outputs)(x)
        return keras.Model(inputs, outputs, name=f"images_{model}")

    # -- data ------------------------------------------------------------------------------
    def _split(self) -> tuple[ImageFiles, ImageFiles]:
        """Seeded stratified split; each side in path order. Sets ``class_names``."""
        files = list_images(self.options["path"])
        if self.options["task"] == TaskKind.BINARY.value and len(files.classes) != 2:
            raise option_error(
                "task",
                "",
                detail=f"binary needs exactly two class folders; "
                f"{self.options['path']!r} has {len(files.classes)} "
                f"({', '.join(files.classes)}); use task=multiclass",
            )
        train, val = stratified_split(
            files.labels, len(files.paths), self.options["val_fraction"], self.options["seed"]
        )
        if len(train) == 0 or len(val) == 0:
            raise option_error(
                "path",
                "",
                detail=f"{self.options['path']!r} has only "
                f"{len(files.paths)} images, too few for a validation split of "
                f"{self.options['val_fraction']:g}; add images",
            )
        self.class_names = files.classes
        return files.take(np.sort(train)), files.take(np.sort(val))

    def _decoded(self, files: ImageFiles, seed: int | None = None) -> Any:
        """(image, label) examples of ``files``: in their order, or (``seed``) with the file
        names shuffled from ``seed``, reshuffled every epoch; decoded in a deterministic
        parallel map."""
        import tensorflow as tf

        size, channels = self.options["image_size"], self.options["channels"]
        binary = self.options["task"] == TaskKind.BINARY.value
        labels = files.labels.astype(np.float32 if binary else np.int32)
        three = [p.lower().endswith(_THREE_CHANNELS_ONLY) for p in files.paths]
        names = tf.data.Dataset.from_tensor_slices((list(files.paths), labels, three))
        if seed is not None:
            names = names.shuffle(
                max(1, len(files.paths)), seed=seed, reshuffle_each_iteration=True
            )

        def load(path: Any, label: Any, three_only: Any) -> Any:
            return _decode(tf, tf.io.read_file(path), three_only, size, channels), label

        return names.map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    def _streams(self, train: ImageFiles, val: ImageFiles) -> Streams:
        """This shard's training files are every ``num_shards``-th from ``shard_index``."""
        size, channels = self.options["image_size"], self.options["channels"]

        def train_stream(seed: int, num_shards: int = 1, shard_index: int = 0) -> Any:
            mine = np.arange(shard_index, len(train.paths), num_shards)
            return self._decoded(train.take(mine), seed)

        binary = self.options["task"] == TaskKind.BINARY.value
        return Streams(
            train=train_stream,
            val=lambda: self._decoded(val),
            input_shape=(size, size, channels),
            num_classes=1 if binary else len(train.classes),
            train_examples=len(train.paths),
            val_examples=len(val.paths),
        )


def _decode(tf: Any, raw: Any, three_only: Any, size: int, channels: int) -> Any:
    """Bytes of one image -> float32 [size, size, channels] in [0, 1]."""

    def direct() -> Any:
        return tf.io.decode_image(raw, channels=channels, expand_animations=False)

    def via_rgb() -> Any:
        rgb = tf.io.decode_image(raw, channels=3, expand_animations=False)
        return tf.image.rgb_to_grayscale(rgb) if channels == 1 else rgb

    image = direct() if channels == 3 else tf.cond(three_only, via_rgb, direct)
    image = tf.ensure_shape(image, [None, None, channels])
    resized = tf.image.resize(tf.cast(image, tf.float32), [size, size])
    return tf.clip_by_value(resized / 255.0, 0.0, 1.0)


#: The first bytes of each image format `tf.io.decode_image` reads.
_SIGNATURES = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")


def check_signatures(paths: tuple[str, ...]) -> None:
    """Every file starts as a PNG, JPEG, GIF or BMP file does (its first 8 bytes read).

    Raises:
        FieldError: on option ``path``, naming the first file that does not, or cannot be read.
    """
    for path in paths:
        try:
            with open(path, "rb") as file:
                head = file.read(8)
        except OSError as exc:
            raise option_error(
                "path", "", detail=f"cannot read {path!r} ({exc.strerror})"
            ) from None
        if not head.startswith(_SIGNATURES):
            raise option_error(
                "path",
                "",
                detail=f"{path!r} is not a PNG, JPEG, GIF or BMP image (it starts with "
                f"{head!r}); remove it from the folder or convert it",
            )


def _arrays(dataset: Any, paths: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The decoded images and labels of ``dataset`` (of the images at ``paths``), in memory.

    Raises:
        FieldError: on option ``path``, naming the first image that does not decode.
    """
    import tensorflow as tf

    xs, ys = [], []
    try:
        for x, y in dataset.batch(256):
            xs.append(np.asarray(x))
            ys.append(np.asarray(y))
    except (tf.errors.OpError, UnicodeDecodeError):
        raise option_error("path", "", detail=_undecodable(tf, paths)) from None
    return np.concatenate(xs), np.concatenate(ys)


def _undecodable(tf: Any, paths: tuple[str, ...]) -> str:
    """Which image of ``paths`` does not decode, and why (looked for file by file)."""
    for path in paths:
        try:
            tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        except (tf.errors.OpError, UnicodeDecodeError) as exc:
            reason = " ".join(str(getattr(exc, "message", exc)).split())[:200]
            return f"{path!r} does not decode as an image ({reason}); remove it or save it again"
    return "an image does not decode; check the folder's images"


def _path_option(name: str, value: Any) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise option_error(
            name,
            "must be a directory",
            value,
            detail="the images workload needs a directory of class folders; give path=DIR "
            f"(got {value!r})",
        )
    return os.fspath(value)


def _channels_option(name: str, value: Any) -> int:
    if isinstance(value, bool) or str(value).strip() not in ("1", "3"):
        raise option_error(name, "must be 1 or 3", value)
    return int(str(value).strip())


def _conv_bn(x: Any, filters: int, *, stride: int, relu: bool, kernel: int = 3) -> Any:
    import keras

    x = keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False)(x)
    x = keras.layers.BatchNormalization(synchronized=True)(x)
    return keras.layers.ReLU()(x) if relu else x


def _residual_block(x: Any, filters: int, stride: int) -> Any:
    """conv-BN-ReLU-conv-BN plus the input (1x1 conv-BN when the shape changes), then ReLU."""
    import keras

    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, stride=stride, relu=False, kernel=1)
    y = _conv_bn(x, filters, stride=stride, relu=True)
    y = _conv_bn(y, filters, stride=1, relu=False)
    return keras.layers.ReLU()(keras.layers.Add()([shortcut, y]))
