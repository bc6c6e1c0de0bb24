"""What data a workload loaded, described once in the worker that loaded them.

`describe_data` gives the `DataDescription` every trial carries (and MLflow shows as the runs'
dataset input):

- ``name``: the workload and the options that differ from its defaults, e.g. ``mnist1d`` or
  ``mnist1d(samples=4000)``; for data read from files, the file's (or folder's) name with the
  workload, e.g. ``train.csv (csv)``;
- ``source``: the generator call with every option, e.g.
  ``mnist1d(samples=4000, seed=42)`` (``source_type`` ``code``), or the absolute data path
  (``local``);
- ``digest``: 16 hex digits of SHA-256. Arrays in memory (`Dataset`): over their dtypes, shapes
  and bytes (train and validation, features and labels), so equal data give equal digests
  whatever produced them. Streamed data (`Streams`): over the workload, its options and every
  data file's path, size and modification time (reading files larger than memory only to hash
  them is no option); rewriting a file changes it, copying the data elsewhere does too;
- ``train_rows`` / ``val_rows``: the examples of each split;
- ``schema``: features and labels with dtype and per-example shape, and the model's outputs.

Data files are the options whose value is a path or glob pattern that names existing files
(``path`` of csv and images, ``train``/``val`` of tfrecord, and any user workload's alike); a
folder counts with every file under it. Hashing costs about 1 s per GB of arrays, once per
worker and dataset (the worker caches both).
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from study.results import DataDescription
from study.workloads.base import Dataset, Streams, Workload

#: Hex digits of a digest (MLflow keeps up to 36).
DIGEST_CHARS = 16


def describe_data(workload: Workload, data: Dataset | Streams) -> DataDescription:
    """The description of ``data``, which ``workload`` loaded."""
    files = data_paths(workload.options)
    if isinstance(data, Dataset):
        digest = array_digest(data.x_train, data.y_train, data.x_val, data.y_val)
        rows = (len(data.x_train), len(data.x_val))
        schema = (
            ("features", _array_type(data.x_train)),
            ("label", _array_type(data.y_train)),
        )
    else:
        digest = files_digest(workload.name, workload.options, files)
        rows = (data.train_examples, data.val_examples)
        schema = (("features", f"{data.input_dtype}{list(data.input_shape)}"),)
    schema += (("outputs", str(data.outputs)),)
    call = f"{workload.name}({_options_text(workload.options)})"
    if files:
        first = files[0]
        return DataDescription(
            name=f"{first.name} ({workload.name})",
            source=str(first),
            source_type="local",
            digest=digest,
            train_rows=int(rows[0]),
            val_rows=int(rows[1]),
            schema=schema,
        )
    changed = {
        k: v
        for k, v in workload.options.items()
        if k in workload.option_specs and v != workload.option_specs[k].default
    }
    name = f"{workload.name}({_options_text(changed)})" if changed else workload.name
    return DataDescription(
        name=name,
        source=call,
        digest=digest,
        train_rows=int(rows[0]),
        val_rows=int(rows[1]),
        schema=schema,
    )


def array_digest(*arrays: np.ndarray) -> str:
    """SHA-256 over each array's dtype, shape and bytes, cut to `DIGEST_CHARS` hex digits.

    Example: the same arrays in another memory layout give the same digest; one changed value
    or a transposed shape gives another.
    """
    digest = hashlib.sha256()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        if array.dtype.hasobject:  # e.g. strings as Python objects: their text
            digest.update(repr(array.tolist()).encode())
        else:
            digest.update(memoryview(array.reshape(-1).view(np.uint8)))
    return digest.hexdigest()[:DIGEST_CHARS]


def files_digest(workload: str, options: Mapping[str, Any], files: list[Path]) -> str:
    """SHA-256 over the workload, its options and every file's path, size and modification time
    (in nanoseconds), cut to `DIGEST_CHARS` hex digits."""
    digest = hashlib.sha256(f"{workload}({_options_text(options)})".encode())
    for path in _every_file(files):
        stat = path.stat()
        digest.update(f"\n{path}\t{stat.st_size}\t{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:DIGEST_CHARS]


def data_paths(options: Mapping[str, Any]) -> list[Path]:
    """The existing files and folders the options name (a string or path, or a glob pattern),
    absolute, in option order; option values that name nothing (column names, ...) are left
    out."""
    found: list[Path] = []
    for value in options.values():
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value).strip():
            continue
        text = os.path.expanduser(os.fspath(value))
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        for match in matches:
            path = Path(match).resolve()
            if path.exists() and path not in found:
                found.append(path)
    return found


def _every_file(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        else:
            yield path


def _array_type(array: np.ndarray) -> str:
    """``float32[40]`` (dtype and the shape of one example)."""
    return f"{array.dtype}{list(array.shape[1:])}"


def _options_text(options: Mapping[str, Any]) -> str:
    """``samples=4000, seed=42`` (sorted by name)."""
    return ", ".join(
        f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in sorted(options.items())
    )
