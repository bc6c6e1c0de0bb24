"""Your own CSV file: numeric feature columns (model ``mlp``) or one text column (model ``text``).

Labels may be any values; they become class ids 0..K-1 in sorted order (``class_names``). In
numeric mode every column but the label is a feature, standardised with training statistics. In
text mode only the text column is used (an empty cell is an empty text): it is tokenised with
``keras.layers.TextVectorization`` adapted on the training texts, so the trainer receives int32
token ids, as in the classic Keras sentiment model (padding id 0 is masked in the model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from study.errors import UsageError
from study.workloads import float_option, int_option
from study.workloads.base import Dataset, Workload

if TYPE_CHECKING:  # pragma: no cover
    import keras


@dataclass(frozen=True)
class _Table:
    """The checked contents of the file: features (a frame, or a text series) and class ids."""

    features: pd.DataFrame | pd.Series
    labels: np.ndarray
    class_names: tuple[Any, ...]


class CsvWorkload(Workload):
    """Classify the rows of a CSV file by its ``label`` column.

    Example: ``CsvWorkload(path="reviews.csv", label="sentiment", text_column="review")``
    trains the ``text`` model on token ids of the ``review`` column.
    """

    name: ClassVar[str] = "csv"
    models: ClassVar[tuple[str, ...]] = ("mlp", "text")
    default_target: ClassVar[str] = "val_accuracy>=0.8"

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        label: str | None = None,
        text_column: str | None = None,
        val_fraction: float = 0.2,
        seed: int = 0,
        max_tokens: int = 10_000,
        sequence_length: int = 64,
        embedding_dim: int = 16,
    ) -> None:
        super().__init__()
        self._options = {
            "path": _name_option("--csv", path, "a file path"),
            "label": _name_option("--label", label, "a column name"),
            "text_column": _name_option("--text-column", text_column, "a column name"),
            "val_fraction": float_option("val_fraction", val_fraction, low=0.0, high=1.0),
            "seed": int_option("seed", seed, minimum=0),
            "max_tokens": int_option("max_tokens", max_tokens, minimum=3),
            "sequence_length": int_option("sequence_length", sequence_length, minimum=1),
            "embedding_dim": int_option("embedding_dim", embedding_dim, minimum=1),
        }
        self.class_names: tuple[Any, ...] = ()

    def check_model(self, model: str | None) -> str:
        """``text`` with a text column, else ``mlp``; the other model is refused."""
        text_mode = self._options["text_column"] is not None
        default = "text" if text_mode else "mlp"
        if model is None:
            return default
        model = super().check_model(model)
        if model != default:
            fix = (
                "model 'mlp' needs numeric columns, but --text-column is set; use --model text"
                if text_mode
                else "model 'text' needs --text-column COLUMN; without it use --model mlp"
            )
            raise UsageError(f"--model: {fix}")
        return model

    def validate(self) -> None:
        """Read the file and check the columns (pandas only, no TensorFlow)."""
        self._table()

    def load(self) -> Dataset:
        """Read, check, split (seeded, stratified) and encode the file."""
        table = self._table()
        train, val = _split(table.labels, self._options["val_fraction"], self._options["seed"])
        if len(train) == 0 or len(val) == 0:
            raise UsageError(
                f"--csv: {self._file_name} has only {len(table.labels)} data rows, too few for "
                f"a validation split of {self._options['val_fraction']:g}; add rows"
            )
        if isinstance(table.features, pd.Series):
            x_train, x_val = self._vectorize(table.features.to_numpy(), train, val)
        else:
            x_train, x_val = _standardize(table.features.to_numpy(np.float64), train, val)
        return Dataset(
            x_train,
            table.labels[train],
            x_val,
            table.labels[val],
            num_classes=len(table.class_names),
        )

    def build_model(self, model: str, data: Dataset) -> keras.Model:
        """``mlp``: Dense(64, relu) x 2 -> Dense(K).

        ``text``: Embedding(max_tokens, embedding_dim) -> GlobalAveragePooling1D -> Dense(16, relu)
        -> Dense(K). Padding is masked out of the average: unmasked, the ~50 padding positions of
        a short review drown its words and SGD stays at chance on examples/data/reviews.csv.
        """
        import keras

        model = self.check_model(model)
        if model == "text":
            layers = [
                keras.Input(shape=data.input_shape, dtype="int32"),
                keras.layers.Embedding(
                    self._options["max_tokens"], self._options["embedding_dim"], mask_zero=True
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
        return keras.Sequential(
            [*layers, keras.layers.Dense(data.num_classes)], name=f"csv_{model}"
        )

    @property
    def _file_name(self) -> str:
        return Path(self._options["path"] or "").name

    def _read(self) -> pd.DataFrame:
        """The parsed file, or `UsageError` saying why it cannot be read."""
        path = self._options["path"]
        if path is None:
            raise UsageError("--csv: the csv workload needs a file; give --csv FILE")
        try:
            frame = pd.read_csv(Path(path).expanduser())
        except OSError as exc:
            raise UsageError(f"--csv: cannot read {path!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"--csv: cannot read {path!r}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"--csv: cannot read {path!r}: {reason}") from None
        if frame.empty:
            raise UsageError(f"--csv: {path!r} has no data rows; add rows below the header")
        return frame

    def _table(self) -> _Table:
        """Check the columns and encode the labels; sets ``class_names``."""
        frame = self._read()
        label, text = self._options["label"], self._options["text_column"]
        if label is None:
            raise UsageError(
                "--label: the csv workload needs the label column; give --label COLUMN"
            )
        self._require_column("--label", label, frame)
        labels, class_names = self._encode_labels(frame[label])
        if text is not None:
            self._require_column("--text-column", text, frame)
            if text == label:
                raise UsageError(
                    f"--text-column: {text!r} is also the label column; give the text column"
                )
            features: pd.DataFrame | pd.Series = frame[text].fillna("").astype(str)
        else:
            features = self._numeric_features(frame.drop(columns=[label]))
        self.class_names = class_names
        return _Table(features, labels, class_names)

    def _encode_labels(self, values: pd.Series) -> tuple[np.ndarray, tuple[Any, ...]]:
        """Class ids 0..K-1 in sorted order of the values, and the values (class names)."""
        _reject_missing("--label", values, self._file_name)
        uniques = sorted(pd.unique(values))
        class_names = tuple(_plain(v) for v in uniques)
        if len(class_names) < 2:
            raise UsageError(
                f"--label: column {values.name!r} in {self._file_name} has only the value "
                f"{class_names[0]!r}; a classifier needs at least 2 classes"
            )
        return pd.Categorical(values, categories=uniques).codes.astype(np.int32), class_names

    def _require_column(self, option: str, column: str, frame: pd.DataFrame) -> None:
        if column not in frame.columns:
            raise UsageError(
                f"{option}: column {column!r} not in {self._file_name} "
                f"(columns: {', '.join(map(str, frame.columns))})"
            )

    def _numeric_features(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Every column must be numeric and complete; booleans count as 0/1."""
        if frame.shape[1] == 0:
            raise UsageError(
                f"--csv: {self._file_name} has no feature columns besides the label; "
                "add numeric columns, or a text column with --text-column"
            )
        for column in frame.columns:
            values = frame[column]
            if not pd.api.types.is_numeric_dtype(values):
                numbers = pd.to_numeric(values, errors="coerce")
                bad = np.flatnonzero(numbers.isna() & values.notna())
                row = int(bad[0]) if len(bad) else 0
                raise UsageError(
                    f"--csv: column {column!r} in {self._file_name} is not numeric "
                    f"(data row {row + 1}: {values.iloc[row]!r}); drop it, or give "
                    f"--text-column {column} if it holds the text to classify"
                )
            _reject_missing("--csv", values, self._file_name)
        return frame.astype(np.float64)

    def _vectorize(
        self, texts: np.ndarray, train: np.ndarray, val: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (int32) from a TextVectorization adapted on the training texts only."""
        import keras

        vectorizer = keras.layers.TextVectorization(
            max_tokens=self._options["max_tokens"],
            output_sequence_length=self._options["sequence_length"],
        )
        vectorizer.adapt(texts[train])
        return _token_ids(vectorizer, texts[train]), _token_ids(vectorizer, texts[val])


def _token_ids(vectorizer: Any, texts: np.ndarray) -> np.ndarray:
    """int32 ids; a text without tokens becomes one out-of-vocabulary token (id 1), so that the
    masked average never divides by zero."""
    ids = np.asarray(vectorizer(texts), dtype=np.int32)
    ids[ids.max(axis=1, initial=0) == 0, 0] = 1
    return ids


def _name_option(option: str, value: Any, what: str) -> str | None:
    """A path or column name as a string (numbers accepted: CSV headers are text)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float, os.PathLike)):
        raise UsageError(f"{option}: expected {what} (got {value!r})")
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    if not text.strip():
        raise UsageError(f"{option}: expected {what} (got an empty string)")
    return text


def _reject_missing(option: str, values: pd.Series, file_name: str) -> None:
    missing = np.flatnonzero(values.isna().to_numpy())
    if len(missing):
        raise UsageError(
            f"{option}: column {values.name!r} in {file_name} has {len(missing)} empty "
            f"value(s) (first at data row {missing[0] + 1}); fill or drop those rows"
        )


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value (so class names log and compare cleanly)."""
    return value.item() if isinstance(value, np.generic) else value


def _split(labels: np.ndarray, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split: about ``val_fraction`` of each class goes to validation."""
    rng = np.random.default_rng(seed)
    val_parts = []
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        val_parts.append(members[: round(len(members) * val_fraction)])
    val = np.concatenate(val_parts)
    train = np.setdiff1d(np.arange(len(labels)), val)
    return rng.permutation(train), rng.permutation(val)


def _standardize(
    x: np.ndarray, train: np.ndarray, val: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Zero mean, unit variance with training statistics (a constant column stays 0)."""
    mean = x[train].mean(axis=0)
    std = x[train].std(axis=0)
    std = np.where(std > 0, std, 1.0)
    scaled = ((x - mean) / std).astype(np.float32)
    return scaled[train], scaled[val]
