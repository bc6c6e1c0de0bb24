"""Hypothesis strategies for the data files the file workloads read: CSV files, TFRecord files
and image folders, mostly well formed, then damaged (wrong or duplicate columns, ragged rows,
junk bytes, empty or truncated files, other encodings, records that are not the spec's, files
in an image folder that are not images, images of mixed sizes and modes).

A drawn `DataCase` is a recipe: `DataCase.write` makes its files in a folder and returns the
workload's options pointing at them (TensorFlow writes the TFRecords, Pillow the images).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz_files import EXTREMES

__all__ = ["Damage", "DataCase", "data_file_cases"]


@dataclass(frozen=True)
class DataCase:
    """A workload (``csv``, ``tfrecord``, ``images``), its files and its options; options
    whose value is ``@FOLDER/...`` are paths inside the folder the files are written to."""

    workload: str
    files: tuple[tuple[str, Any, Damage], ...]
    options: tuple[tuple[str, Any], ...]

    def write(self, folder: Path) -> dict[str, Any]:
        for name, content, damage in self.files:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, list):
                _write_records(path, content)
                content = path.read_bytes()
            path.write_bytes(damage(content))
        return {
            k: v.replace("@FOLDER", str(folder)) if isinstance(v, str) else v
            for k, v in self.options
        }

    def describe(self) -> tuple[str, ...]:
        files = ", ".join(f"{name} ({damage.how})" for name, _, damage in self.files)
        return (self.workload, f"files: {files}", f"options: {dict(self.options)!r}")


def _write_records(path: Path, records: list[bytes]) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


@dataclass(frozen=True)
class Damage:
    """What is done to a file's bytes: kept, ``cut`` at a share of its length, ``empty``,
    ``junk`` bytes put in at that share, or a junk ``prefix``."""

    how: str = "keep"
    at: float = 0.0
    junk: bytes = b""

    def __call__(self, data: bytes) -> bytes:
        at = int(len(data) * self.at)
        if self.how == "cut":
            return data[: min(at, max(0, len(data) - 1))]
        if self.how == "empty":
            return b""
        if self.how == "junk":
            return data[:at] + self.junk + data[at:]
        if self.how == "prefix":
            return self.junk + data
        return data


DAMAGES = st.builds(
    Damage,
    st.sampled_from(("keep",) * 16 + ("cut", "empty", "junk", "prefix")),
    st.floats(0, 1),
    st.binary(min_size=1, max_size=16),
)


# -- CSV -----------------------------------------------------------------------------------
_CELLS = st.one_of(
    st.integers(-5, 5).map(str),
    st.floats(-10, 10).map(lambda x: f"{x:.3g}"),
    st.sampled_from(EXTREMES).map(str),
    st.sampled_from(("", "a", "b", "good movie", "bad", '"quoted, comma"', '"multi\nline"',
                     "caf\u00e9", "\U0001f600", "NA", "null", "True", '"', "1,5")),
)  # fmt: skip


@st.composite
def csv_cases(draw: st.DrawFn) -> DataCase:
    """A CSV of numeric features and a label (and a text column), then damaged."""
    columns = ["x1", "x2", "y", "text"][: draw(st.integers(1, 4))]
    if draw(st.integers(0, 5)) == 0:
        columns.append(draw(st.sampled_from(("x1", "", "caf\u00e9", "a,b", "y "))))
    rows = []
    classes = draw(st.sampled_from((("0", "1"), ("a", "b", "c"), ("1",), ("0", "1", "2.5"))))
    for i in range(draw(st.integers(0, 40))):
        row = [f"{(i * 7) % 11 / 3:.3f}", f"{i % 5}", classes[i % len(classes)], "nice film"]
        row = row[: len(columns)] + [draw(_CELLS) for _ in columns[4:]]
        if draw(st.integers(0, 12)) == 0:
            row[draw(st.integers(0, len(row) - 1))] = draw(_CELLS)
        if draw(st.integers(0, 15)) == 0:
            row = row[: draw(st.integers(0, len(row)))] or [*row, draw(_CELLS)]
        rows.append(",".join(row))
    text = "\n".join([",".join(columns), *rows]) + "\n"
    encoding = draw(st.sampled_from(("utf-8",) * 12 + ("latin-1", "utf-16", "utf-8-sig")))
    data = text.encode(encoding, errors="replace")
    options: dict[str, Any] = {"path": "@FOLDER/data.csv", "label": "y"}
    if draw(st.integers(0, 3)) == 0:
        options["label"] = draw(st.sampled_from(("x1", "text", "nope", "", "y,x1")))
    if "text" in columns and draw(st.booleans()):
        options["text_column"] = "text"
    for key, values in (("task", ("binary", "multilabel", "regression", "multiclass")),
                        ("streamed", (True, False)), ("split", ("hash", "stratified")),
                        ("val_fraction", (0.0, 1.0, 0.5, 0.01, 0.99))):  # fmt: skip
        if draw(st.integers(0, 5)) == 0:
            options[key] = draw(st.sampled_from(values))
    return DataCase("csv", (("data.csv", data, draw(DAMAGES)),), tuple(options.items()))


# -- TFRecord ------------------------------------------------------------------------------
def _example(x: Any, y: Any) -> bytes:
    from tensorflow.core.example import example_pb2, feature_pb2

    def feature(value: Any) -> Any:
        if isinstance(value, bytes):
            return feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[value]))
        if value and isinstance(value[0], float):
            return feature_pb2.Feature(float_list=feature_pb2.FloatList(value=value))
        return feature_pb2.Feature(int64_list=feature_pb2.Int64List(value=value))

    features = {"x": feature(x), "y": feature(y)}
    example = example_pb2.Example(features=feature_pb2.Features(feature=features))
    return example.SerializeToString()


@st.composite
def _records(draw: st.DrawFn) -> list[bytes]:
    """Examples ``x: float32[4], y: int64[]``, some wrong, some not examples at all."""
    records: list[bytes] = []
    for i in range(draw(st.integers(0, 12))):
        x: Any = [float(i % 3), 1.0, -1.0, 0.5]
        y: Any = [i % 3]
        wrong = draw(st.integers(0, 14))
        if wrong == 0:
            x = draw(st.sampled_from(([1.0, 2.0, 3.0], [1, 2, 3, 4], b"junk", [], [1.0] * 9)))
        elif wrong == 1:
            y = draw(st.sampled_from(([0.5], [-1], [2**62], [0, 1], b"cat", [])))
        records.append(_example(x, y))
        if wrong == 2:
            records[-1] = draw(st.binary(max_size=24))
    return records


@st.composite
def tfrecord_cases(draw: st.DrawFn) -> DataCase:
    """Train and val TFRecord files of ``x: float32[4], y: int64[]`` examples, some damaged."""
    files = tuple(
        (f"{part}-0.tfrecord", draw(_records()), draw(DAMAGES)) for part in ("train", "val")
    )
    options: dict[str, Any] = {
        "train": "@FOLDER/train-*.tfrecord",
        "val": "@FOLDER/val-*.tfrecord",
        "features": "x:float32[4],y:int64[]",
        "label": "y",
    }
    if draw(st.integers(0, 3)) == 0:
        options["features"] = draw(st.sampled_from(
            ("x:float32[3],y:int64[]", "x:int64[4],y:int64[]", "x:float32[4],y:float32[]",
             "x:float32[2,2],y:int64[]", "z:float32[4],y:int64[]")))  # fmt: skip
    if draw(st.integers(0, 3)) == 0:
        options["task"] = draw(st.sampled_from(("binary", "regression", "multilabel")))
    if draw(st.integers(0, 5)) == 0:
        options["num_classes"] = draw(st.sampled_from((2, 3, 100, 1)))
    return DataCase("tfrecord", files, tuple(options.items()))


# -- image folders -------------------------------------------------------------------------
@st.composite
def _image(draw: st.DrawFn) -> tuple[str, bytes]:
    """An image file's name and bytes: PNG, JPEG, GIF or BMP of some size and mode, or not an
    image at all."""
    from PIL import Image

    kind = draw(st.sampled_from(("png",) * 4 + ("jpg", "jpeg", "gif", "bmp", "text")))
    if kind == "text":
        return draw(st.sampled_from(("a.png", "b.jpg", "c.txt", ".hidden.png"))), b"not an image"
    mode = draw(st.sampled_from(("RGB", "L", "RGBA", "P", "1", "I;16") if kind == "png" else
                                ("RGB", "L")))  # fmt: skip
    size = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    out = io.BytesIO()
    Image.new(mode, size, color=draw(st.integers(0, 255))).save(
        out, format=kind.replace("jpg", "jpeg")
    )
    return f"{draw(st.integers(0, 10**6))}.{kind}", out.getvalue()


@st.composite
def image_cases(draw: st.DrawFn) -> DataCase:
    """Class folders of images (one to three classes, nested folders now and then)."""
    files = []
    for label in ("cat", "dog", "eel")[: draw(st.sampled_from((1, 2, 2, 2, 3)))]:
        for _ in range(draw(st.integers(0, 6))):
            name, data = draw(_image())
            nested = "deep/" if draw(st.integers(0, 6)) == 0 else ""
            files.append((f"images/{label}/{nested}{name}", data, draw(DAMAGES)))
    options: dict[str, Any] = {"path": "@FOLDER/images", "image_size": 8}
    for key, values in (("channels", (1, 3, 4)), ("streamed", (True, False)),
                        ("task", ("binary", "multiclass")), ("image_size", (4, 5, 64)),
                        ("val_fraction", (0.0, 0.5, 1.0))):  # fmt: skip
        if draw(st.integers(0, 4)) == 0:
            options[key] = draw(st.sampled_from(values))
    return DataCase("images", tuple(files), tuple(options.items()))


def data_file_cases() -> st.SearchStrategy[DataCase]:
    """A CSV, TFRecord or image-folder case."""
    return st.one_of(csv_cases(), tfrecord_cases(), image_cases())
