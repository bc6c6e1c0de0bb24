"""The csv workload's reading rules: label columns per task, value checks, statistics.

Used by the in-memory path (on the whole frame) and by the streamed path (`scan`: one chunked
pandas pass over a file larger than memory). Every check raises a one-line `FieldError` on
the option it is about (``path`` for the file and its features, ``label`` for the label
columns), naming the file, the column and the offending value.

Example::

    scan(path, Columns(("y",), ("a", "b")), TaskKind.REGRESSION, seed=0, val_fraction=0.2)
    # -> Scan(rows=..., train_rows=..., labels=Labels(mean=(...), std=(...)), feature_mean=...)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from study.errors import FieldError
from study.workloads.files import RunningStats, val_rows
from study.workloads.task import TaskKind

CLASSIFICATION = (TaskKind.MULTICLASS, TaskKind.BINARY)
#: A streamed multi-class label may take at most this many values (memory stays bounded).
MAX_STREAMED_CLASSES = 10_000


@dataclass(frozen=True)
class Columns:
    """Which columns are labels and which are numeric features (empty in text mode)."""

    labels: tuple[str, ...]
    features: tuple[str, ...]


@dataclass(frozen=True)
class Labels:
    """How the label columns become model targets.

    Classification: ``class_values`` sorted (numbers numerically, else as text), id = position;
    binary: the larger value is the positive class (1). Regression: standardised with the
    training rows' ``mean`` and ``std``.
    """

    kind: TaskKind
    columns: tuple[str, ...]
    class_values: tuple[Any, ...] = ()
    numeric: bool = True
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    @property
    def outputs(self) -> int:
        """Model outputs: classes (multiclass), 1 (binary), one per label column otherwise."""
        if self.kind is TaskKind.MULTICLASS:
            return len(self.class_values)
        if self.kind is TaskKind.BINARY:
            return 1
        return len(self.columns)


@dataclass(frozen=True)
class Scan:
    """What one pass over a file found: row counts, labels, training feature statistics."""

    rows: int
    train_rows: int
    val_rows: int
    labels: Labels
    feature_mean: tuple[float, ...] = field(default=())
    feature_std: tuple[float, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        labels = self.labels
        return {
            "rows": self.rows,
            "train_rows": self.train_rows,
            "val_rows": self.val_rows,
            "kind": labels.kind.value,
            "columns": list(labels.columns),
            "class_values": list(labels.class_values),
            "numeric": labels.numeric,
            "label_mean": list(labels.mean),
            "label_std": list(labels.std),
            "feature_mean": list(self.feature_mean),
            "feature_std": list(self.feature_std),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scan:
        labels = Labels(
            TaskKind(data["kind"]),
            tuple(data["columns"]),
            tuple(data["class_values"]),
            bool(data["numeric"]),
            tuple(data["label_mean"]),
            tuple(data["label_std"]),
        )
        return cls(
            data["rows"],
            data["train_rows"],
            data["val_rows"],
            labels,
            tuple(data["feature_mean"]),
            tuple(data["feature_std"]),
        )


def problem(option: str, detail: str) -> FieldError:
    """`FieldError` on workload option ``option`` (``path``, ``label``, ``text_column``),
    worded "workload option 'label': DETAIL" until the front end names it."""
    return FieldError(option, detail=detail, name=f"workload option {option!r}")


# -- columns ---------------------------------------------------------------------------------


def label_columns(
    option: str, columns: Sequence[str], kind: TaskKind, file_name: str
) -> tuple[str, ...]:
    """The label columns named by option ``label``: one column, or (multilabel, regression)
    several separated by commas.

    Raises:
        FieldError: on ``label``: "label: column 'y' not in x.csv (columns: a, b, c)"; several
            columns for a classification task.
    """
    names = (option,) if option in columns else tuple(p.strip() for p in option.split(","))
    for name in names:
        if name not in columns:
            raise problem(
                "label",
                f"column {name!r} not in {file_name} (columns: {', '.join(map(str, columns))})",
            )
    if len(set(names)) != len(names):
        raise problem("label", f"a column is named twice in {option!r}")
    if len(names) > 1 and kind in CLASSIFICATION:
        raise problem(
            "label",
            f"task {kind.value} takes one label column (got {option!r}); several 0/1 "
            "columns are task multilabel, several numeric ones task regression",
        )
    return names


def read_dtypes(kind: TaskKind, labels: Iterable[str]) -> dict[str, Any]:
    """Classification labels are read as text, so every pass sees the same values."""
    return dict.fromkeys(labels, str) if kind in CLASSIFICATION else {}


# -- checks ----------------------------------------------------------------------------------


def reject_missing(
    option: str, values: pd.Series, file_name: str, first_row: int = 0, whole: bool = True
) -> None:
    """Raise `FieldError` on ``option`` for empty cells; ``first_row`` is the data row number
    of ``values``' first row."""
    missing = np.flatnonzero(values.isna().to_numpy())
    if len(missing):
        row = first_row + int(missing[0]) + 1
        count = (
            f"{len(missing)} empty value(s) (first at data row {row})"
            if whole
            else (f"an empty value at data row {row}")
        )
        raise problem(
            option,
            f"column {values.name!r} in {file_name} has {count}; fill or drop those rows",
        )


def check_features(
    frame: pd.DataFrame, file_name: str, first_row: int = 0, *, streamed: bool = False
) -> None:
    """Every feature column numeric and complete (booleans count as 0/1 unless streamed)."""
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_bool_dtype(values) and streamed:
            raise problem(
                "path",
                f"column {column!r} in {file_name} holds True/False; a streamed csv "
                "reads numbers only: write 1/0",
            )
        if not pd.api.types.is_numeric_dtype(values):
            row = _first_non_number(values)
            raise problem(
                "path",
                f"column {column!r} in {file_name} is not numeric "
                f"(data row {first_row + row + 1}: {values.iloc[row]!r}); drop it, or make it "
                "the text column if it holds the text to classify",
            )
        reject_missing("path", values, file_name, first_row, whole=not streamed)


def check_labels(
    frame: pd.DataFrame, kind: TaskKind, file_name: str, first_row: int = 0, whole: bool = True
) -> None:
    """No empty label; regression labels numeric; multi-label columns 0/1."""
    for column in frame.columns:
        values = frame[column]
        reject_missing("label", values, file_name, first_row, whole)
        if kind in CLASSIFICATION:
            continue
        if not pd.api.types.is_numeric_dtype(values):
            row = _first_non_number(values)
            need = "numbers" if kind is TaskKind.REGRESSION else "0 or 1"
            raise problem(
                "label",
                f"column {column!r} in {file_name} is not numeric (data row "
                f"{first_row + row + 1}: {values.iloc[row]!r}); task {kind.value} needs {need}",
            )
        if kind is TaskKind.MULTILABEL:
            bad = np.flatnonzero(~values.isin([0, 1]).to_numpy())
            if len(bad):
                row = int(bad[0])
                raise problem(
                    "label",
                    f"column {column!r} in {file_name} holds "
                    f"{_plain(values.iloc[row])!r} (data row {first_row + row + 1}); task "
                    "multilabel needs 0 or 1 in every label column",
                )


def _first_non_number(values: pd.Series) -> int:
    numbers = pd.to_numeric(values, errors="coerce")
    bad = np.flatnonzero((numbers.isna() & values.notna()).to_numpy())
    return int(bad[0]) if len(bad) else 0


# -- labels ----------------------------------------------------------------------------------


def class_values(
    uniques: Iterable[str], kind: TaskKind, column: str, file_name: str
) -> tuple[tuple[Any, ...], bool]:
    """The sorted class values of a label column read as text, and whether they are numbers.

    Numbers sort numerically ("10" after "9") and are given as int when integral; "1" and
    "1.0" are one class.

    Raises:
        FieldError: on ``label``: fewer than two values; binary with more than two.
    """
    texts = set(uniques)
    numbers = [_number(text) for text in texts]
    numeric = all(n is not None for n in numbers)
    values: list[Any] = sorted({_plain_number(n) for n in numbers}) if numeric else sorted(texts)
    if len(values) < 2:
        raise problem(
            "label",
            f"column {column!r} in {file_name} has only the value {values[0]!r}; "
            "a classifier needs at least 2 classes",
        )
    if kind is TaskKind.BINARY and len(values) > 2:
        shown = ", ".join(repr(v) for v in values[:5]) + (", ..." if len(values) > 5 else "")
        raise problem(
            "label",
            f"column {column!r} in {file_name} has {len(values)} values ({shown}); "
            "task binary needs exactly two (or use task multiclass)",
        )
    return tuple(values), numeric


def encode_classes(values: pd.Series, classes: Sequence[Any], numeric: bool) -> np.ndarray:
    """Class ids (position in ``classes``) of text label values, int32."""
    position = {value: i for i, value in enumerate(classes)}
    lookup = {
        text: position[_plain_number(_number(text)) if numeric else text]
        for text in pd.unique(values)
    }
    return values.map(lookup).to_numpy(np.int32)


def encode_labels(frame: pd.DataFrame, labels: Labels) -> np.ndarray:
    """Model targets from the label columns: int32 ids (multiclass), float32 0/1 (binary),
    float32 [n, K] (multilabel) or standardised float32 [n] / [n, K] (regression)."""
    if labels.kind in CLASSIFICATION:
        ids = encode_classes(frame[labels.columns[0]], labels.class_values, labels.numeric)
        return ids if labels.kind is TaskKind.MULTICLASS else ids.astype(np.float32)
    y = frame[list(labels.columns)].to_numpy(np.float64)
    if labels.kind is TaskKind.REGRESSION:
        y = (y - np.asarray(labels.mean)) / np.asarray(labels.std)
    y = y.astype(np.float32)
    return y[:, 0] if labels.kind is TaskKind.REGRESSION and y.shape[1] == 1 else y


def _number(text: Any) -> float | None:
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def _plain_number(number: float | None) -> int | float:
    assert number is not None
    return int(number) if float(number).is_integer() else float(number)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# -- the streamed pass -----------------------------------------------------------------------


def scan(
    path: str | os.PathLike[str],
    columns: Columns,
    kind: TaskKind,
    *,
    seed: int,
    val_fraction: float,
    chunk_rows: int = 100_000,
) -> Scan:
    """One chunked pass (memory bounded by ``chunk_rows``): counts, class values, and feature
    (and regression label) statistics over the training rows of the hash split.

    Raises:
        FieldError: a bad value anywhere in the file, named by data row; a split with no
            training or no validation rows.
    """
    file_name = Path(path).name
    features, label_stats = RunningStats(), RunningStats()
    uniques: set[str] = set()
    rows = train_rows = 0
    reader = pd.read_csv(
        Path(path).expanduser(),
        usecols=[*columns.labels, *columns.features],
        dtype=read_dtypes(kind, columns.labels),
        chunksize=chunk_rows,
    )
    with reader:
        for chunk in reader:
            first = rows
            label_frame = chunk[list(columns.labels)]
            check_labels(label_frame, kind, file_name, first, whole=False)
            check_features(chunk[list(columns.features)], file_name, first, streamed=True)
            is_val = val_rows(np.arange(first, first + len(chunk)), seed, val_fraction)
            train = chunk[~is_val]
            features.update(train[list(columns.features)].to_numpy(np.float64))
            if kind is TaskKind.REGRESSION:
                label_stats.update(train[list(columns.labels)].to_numpy(np.float64))
            elif kind in CLASSIFICATION:
                uniques.update(label_frame[columns.labels[0]].unique())
                if len(uniques) > MAX_STREAMED_CLASSES:
                    raise problem(
                        "label",
                        f"column {columns.labels[0]!r} in {file_name} has more than "
                        f"{MAX_STREAMED_CLASSES} values; is it a class? (a number to predict "
                        "is task regression)",
                    )
            rows += len(chunk)
            train_rows += len(train)
    check_split(file_name, rows, train_rows, val_fraction)
    labels = Labels(kind, columns.labels)
    if kind in CLASSIFICATION:
        values, numeric = class_values(uniques, kind, columns.labels[0], file_name)
        labels = Labels(kind, columns.labels, values, numeric)
    elif kind is TaskKind.REGRESSION:
        labels = Labels(
            kind, columns.labels, mean=_floats(label_stats.mean), std=_floats(label_stats.std)
        )
    return Scan(
        rows, train_rows, rows - train_rows, labels, _floats(features.mean), _floats(features.std)
    )


def check_split(file_name: str, rows: int, train_rows: int, val_fraction: float) -> None:
    """Raise unless both sides of the split have rows."""
    if train_rows == 0 or train_rows == rows:
        raise problem(
            "path",
            f"{file_name} has only {rows} data rows, too few for a validation split "
            f"of {val_fraction:g}; add rows",
        )


def _floats(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in np.atleast_1d(values))
