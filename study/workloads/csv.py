"""Your own CSV file: numeric feature columns (model ``mlp``) or one text column (model ``text``).

Option ``task`` says what the ``label`` column(s) mean:

- ``multiclass`` (default): any values; they become class ids 0..K-1 in sorted order
  (``class_names``; numbers sort numerically).
- ``binary``: exactly two values; the larger one in sorted order is the positive class (1), e.g.
  ``no``/``yes`` -> ``yes`` = 1, ``0``/``1`` -> ``1`` = 1. One logit; default target
  ``val_auc>=0.9``.
- ``multilabel``: ``label`` lists several 0/1 columns separated by commas (``label=a,b,c``);
  one logit per column; default target ``val_accuracy>=0.9`` (per-label accuracy).
- ``regression``: one or more numeric columns, standardised with the training rows' mean and
  standard deviation (``stats``), so the default target ``val_mse<=0.5`` means "explains at
  least half the variance" (predicting the mean scores 1) whatever the units.

In numeric mode every other column is a feature, standardised with training statistics. In
text mode only the text column is used (an empty cell is an empty text): it is tokenised with
``keras.layers.TextVectorization`` adapted on the training texts, so the trainer receives int32
token ids, as in the classic Keras sentiment model (padding id 0 is masked in the model).

A file larger than memory is **streamed** (option ``streamed: true``, and automatically when the
file is larger than 256 MiB; numeric mode only): one chunked pandas pass finds the row count,
the class values or label statistics and the feature statistics on the training rows, then
`tf.data` reads the file line by line (`study.workloads.csv_stream`). Its split is a seeded hash
of the row number (``split: hash``, about ``val_fraction`` of rows; not stratified); the
in-memory path uses the same split with ``split: hash`` and a seeded stratified one by default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from study.errors import FieldError
from study.workloads.base import Dataset, Streams, Workload
from study.workloads.csv_file import CsvFile, Table, reason
from study.workloads.csv_scan import (
    CLASSIFICATION,
    Columns,
    Labels,
    Scan,
    check_split,
    class_values,
    encode_labels,
    problem,
    scan,
)
from study.workloads.files import (
    cached_json,
    fingerprint,
    stratified_split,
    val_rows,
)
from study.workloads.options import Option, boolean, choice, integer, number, tasks, text
from study.workloads.task import Task, TaskKind

if TYPE_CHECKING:  # pragma: no cover
    import keras

__all__ = ["STREAM_BYTES", "CsvStats", "CsvWorkload"]

#: Files larger than this are streamed unless ``streamed: false``.
STREAM_BYTES = 256 * 2**20
_SPLITS = ("stratified", "hash")
_SCAN_VERSION = 1  # bump when `scan` changes, so cached passes are not reused
_TARGETS = {
    TaskKind.BINARY: "val_auc>=0.9",
    TaskKind.MULTILABEL: "val_accuracy>=0.9",
    TaskKind.REGRESSION: "val_mse<=0.5",
}


@dataclass(frozen=True)
class CsvStats:
    """What `load()` learned from the file (the same in both paths, up to round-off).

    ``feature_mean``/``feature_std`` and (regression) ``label_mean``/``label_std`` are the
    training rows' statistics used to standardise; ``class_names`` the sorted class values.
    """

    rows: int
    train_rows: int
    val_rows: int
    class_names: tuple[Any, ...]
    feature_mean: tuple[float, ...]
    feature_std: tuple[float, ...]
    label_mean: tuple[float, ...] = ()
    label_std: tuple[float, ...] = ()


class CsvWorkload(Workload):
    """Classify, tag or regress the rows of a CSV file by its ``label`` column(s).

    Examples: ``CsvWorkload(path="reviews.csv", label="sentiment", text_column="review")``
    trains the ``text`` model on token ids of the ``review`` column;
    ``CsvWorkload(path="houses.csv", label="price", task="regression", streamed=True)``
    streams a large numeric file and reports ``val_mse`` on standardised prices.
    """

    name: ClassVar[str] = "csv"
    models: ClassVar[tuple[str, ...]] = ("mlp", "text")
    default_target: ClassVar[str] = "val_accuracy>=0.8"

    option_specs: ClassVar[dict[str, Option]] = {
        "path": Option(None, text("a file path")),
        "label": Option(None, text("a column name")),
        "text_column": Option(None, text("a column name")),
        "task": Option("multiclass", tasks()),
        "val_fraction": Option(0.2, number(low=0.0, high=1.0)),
        "seed": Option(0, integer()),
        "split": Option(None, choice(*_SPLITS, optional=True)),
        "streamed": Option(None, boolean(optional=True)),
        "shuffle_buffer": Option(10_000, integer(minimum=1)),
        "chunk_rows": Option(100_000, integer(minimum=1)),
        "max_tokens": Option(10_000, integer(minimum=3)),
        "sequence_length": Option(64, integer(minimum=1)),
        "embedding_dim": Option(16, integer(minimum=1)),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if self.options["streamed"] and self.options["text_column"] is not None:
            raise problem(
                "streamed",
                "text mode (a text column) reads the whole file; a streamed csv needs "
                "numeric feature columns (or set streamed=false)",
            )
        if self.options["streamed"] and self.options["split"] == "stratified":
            raise problem(
                "split",
                "a streamed csv splits by row hash; use split=hash (or streamed=false)",
            )
        self.class_names: tuple[Any, ...] = ()
        self.stats: CsvStats | None = None

    # -- what it is ------------------------------------------------------------------------
    @property
    def kind(self) -> TaskKind:
        return TaskKind(self.options["task"])

    @property
    def task(self) -> Task:
        """Multi-class (default target ``val_accuracy>=0.8``), binary (``val_auc>=0.9``),
        multi-label (``val_accuracy>=0.9``) or regression (``val_mse<=0.5``, standardised)."""
        if self.kind is TaskKind.MULTICLASS:
            return Task.multiclass(self.default_target)
        return Task.named(self.kind.value, target=_TARGETS[self.kind])

    @property
    def streamed(self) -> bool:
        """Streamed: option ``streamed``, else numeric mode and a file over 256 MiB."""
        if self.options["streamed"] is not None:
            return bool(self.options["streamed"])
        if self.options["text_column"] is not None or self.options["path"] is None:
            return False
        try:
            return os.path.getsize(Path(self.options["path"]).expanduser()) > STREAM_BYTES
        except OSError:
            return False

    @property
    def split(self) -> str:
        """``hash`` when streamed or asked for, else ``stratified``."""
        return self.options["split"] or ("hash" if self.streamed else "stratified")

    def check_model(self, model: str | None) -> str:
        """``text`` with a text column, else ``mlp``; the other model is refused."""
        text_mode = self.options["text_column"] is not None
        default = "text" if text_mode else "mlp"
        if model is None:
            return default
        model = super().check_model(model)
        if ":" not in model and model != default:
            fix = (
                "'mlp' needs numeric columns, but a text column is set; use model 'text'"
                if text_mode
                else "'text' needs a text column; without one use model 'mlp'"
            )
            raise FieldError("model", value=model, detail=fix)
        return model

    # -- reading ---------------------------------------------------------------------------
    def validate(self) -> None:
        """Read the file and check the columns (pandas only, no TensorFlow). A streamed file is
        checked on its header and first 1,000 rows; the rest is checked by `load()`."""
        if self.streamed:
            self._peek()
        else:
            self._labels(self._file.table())

    def load(self) -> Dataset | Streams:
        """Read, check, split and encode the file (streamed: one pass, then `Streams`)."""
        if self.streamed:
            return self._streams()
        table = self._file.table()
        labels = self._labels(table)
        train, val = self._split_rows(table, labels)
        frame = table.label_frame
        if labels.kind is TaskKind.REGRESSION:
            y_train_raw = frame.iloc[train].to_numpy(np.float64)
            labels = Labels(
                labels.kind,
                labels.columns,
                mean=_floats(y_train_raw.mean(axis=0)),
                std=_floats(_safe_std(y_train_raw)),
            )
        y = encode_labels(frame, labels)
        if isinstance(table.features, pd.Series):
            x_train, x_val = self._vectorize(table.features.to_numpy(), train, val)
            mean: tuple[float, ...] = ()
            std: tuple[float, ...] = ()
        else:
            x = table.features.to_numpy(np.float64)
            mean, std = _floats(x[train].mean(axis=0)), _floats(_safe_std(x[train]))
            scaled = ((x - np.asarray(mean)) / np.asarray(std)).astype(np.float32)
            x_train, x_val = scaled[train], scaled[val]
        self.stats = CsvStats(
            len(y), len(train), len(val), labels.class_values, mean, std, labels.mean, labels.std
        )
        return Dataset(x_train, y[train], x_val, y[val], num_classes=labels.outputs)

    def build_model(self, model: str, data: Dataset | Streams) -> keras.Model:
        """``mlp``: Dense(64, relu) x 2 -> Dense(outputs).

        ``text``: Embedding(max_tokens, embedding_dim) -> GlobalAveragePooling1D -> Dense(16, relu)
        -> Dense(outputs). Padding is masked out of the average: unmasked, the ~50 padding
        positions of a short review drown its words and SGD stays at chance on
        examples/data/reviews.csv.
        """
        import keras

        model = self.check_model(model)
        if model == "text":
            layers = [
                keras.Input(shape=data.input_shape, dtype="int32"),
                keras.layers.Embedding(
                    self.options["max_tokens"], self.options["embedding_dim"], mask_zero=True
                ),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(16, activation="relu"),
            ]
        else:
            layers = [
                keras.Input(shape=data.input_shape),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(64, activation="relu"),
            ]
        return keras.Sequential([*layers, keras.layers.Dense(data.outputs)], name=f"csv_{model}")

    # -- in memory -------------------------------------------------------------------------
    @property
    def _file(self) -> CsvFile:
        o = self.options
        return CsvFile(o["path"], o["label"], o["text_column"], self.kind)

    def _labels(self, table: Table) -> Labels:
        """Class values (classification) from the whole column; sets ``class_names``."""
        columns = table.columns.labels
        if self.kind not in CLASSIFICATION:
            return Labels(self.kind, columns)
        values, numeric = class_values(
            pd.unique(table.label_frame[columns[0]]), self.kind, columns[0], self._file.file_name
        )
        self.class_names = values
        return Labels(self.kind, columns, values, numeric)

    def _split_rows(self, table: Table, labels: Labels) -> tuple[np.ndarray, np.ndarray]:
        """(train, val) row indices: seeded stratified, or the streamed path's row hash (then
        validation rows keep file order)."""
        count, fraction, seed = (
            len(table.label_frame),
            self.options["val_fraction"],
            self.options["seed"],
        )
        if self.split == "hash":
            is_val = val_rows(np.arange(count), seed, fraction)
            train = np.random.default_rng(seed).permutation(np.flatnonzero(~is_val))
            val = np.flatnonzero(is_val)
        else:
            strata = (
                encode_labels(table.label_frame, labels) if self.kind in CLASSIFICATION else None
            )
            train, val = stratified_split(strata, count, fraction, seed)
        check_split(self._file.file_name, count, len(train), fraction)
        return train, val

    def _vectorize(
        self, texts: np.ndarray, train: np.ndarray, val: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (int32) from a TextVectorization adapted on the training texts only."""
        import keras

        vectorizer = keras.layers.TextVectorization(
            max_tokens=self.options["max_tokens"],
            output_sequence_length=self.options["sequence_length"],
        )
        vectorizer.adapt(texts[train])
        return _token_ids(vectorizer, texts[train]), _token_ids(vectorizer, texts[val])

    # -- streamed --------------------------------------------------------------------------
    def _peek(self) -> tuple[list[str], Columns]:
        """Header and columns of a streamed file, its first rows checked."""
        if self.options["split"] == "stratified":
            raise problem(
                "split",
                f"{self._file.file_name} is larger than {STREAM_BYTES // 2**20} MiB, so "
                "it is streamed and split by row hash; use split=hash (or streamed=false to "
                "read it into memory)",
            )
        return self._file.peek()

    def _scan(self, columns: Columns) -> Scan:
        """The pandas pass over the file, cached by file, columns, task and split."""
        o = self.options
        path = self._file.location()

        def compute() -> dict[str, Any]:
            try:
                found = scan(
                    path,
                    columns,
                    self.kind,
                    seed=o["seed"],
                    val_fraction=o["val_fraction"],
                    chunk_rows=o["chunk_rows"],
                )
            except FieldError:
                raise
            except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
                raise self._file.unreadable(reason(exc)) from None
            return found.to_json()

        key = fingerprint(
            [path],
            version=_SCAN_VERSION,
            columns=[columns.labels, columns.features],
            task=o["task"],
            seed=o["seed"],
            val_fraction=o["val_fraction"],
        )
        return Scan.from_json(cached_json("csv-scan", key, compute))

    def _streams(self) -> Streams:
        from study.workloads.csv_stream import csv_streams

        header, columns = self._peek()
        found = self._scan(columns)
        labels = found.labels
        self.class_names = labels.class_values
        self.stats = CsvStats(
            found.rows,
            found.train_rows,
            found.val_rows,
            labels.class_values,
            found.feature_mean,
            found.feature_std,
            labels.mean,
            labels.std,
        )
        return csv_streams(
            self._file.location(),
            header,
            columns,
            found,
            seed=self.options["seed"],
            val_fraction=self.options["val_fraction"],
            shuffle_buffer=self.options["shuffle_buffer"],
        )


def _token_ids(vectorizer: Any, texts: np.ndarray) -> np.ndarray:
    """int32 ids; a text without tokens becomes one out-of-vocabulary token (id 1), so that the
    masked average never divides by zero."""
    ids = np.asarray(vectorizer(texts), dtype=np.int32)
    ids[ids.max(axis=1, initial=0) == 0, 0] = 1
    return ids


def _floats(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _safe_std(x: np.ndarray) -> np.ndarray:
    """Population standard deviation per column; 1 for a constant column (it stays 0)."""
    std = x.std(axis=0)
    return np.where(std > 0, std, 1.0)
