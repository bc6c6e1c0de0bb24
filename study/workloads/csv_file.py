"""Reading the csv workload's file: its header, which columns are labels and features, and the
checked contents (pandas only, no TensorFlow).

Every problem is a one-line `FieldError` on the option it is about: ``path`` (the file cannot
be read, has no rows or no features), ``label`` (a label column is missing or holds bad values)
or ``text_column``. Example::

    CsvFile("houses.csv", "price", None, TaskKind.REGRESSION).table()
    # -> Table(features=<frame of the other columns>, label_frame=<price>, columns=...)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from study.errors import FieldError
from study.workloads.csv_scan import (
    Columns,
    check_features,
    check_labels,
    label_columns,
    problem,
    read_dtypes,
)
from study.workloads.task import TaskKind

__all__ = ["PEEK_ROWS", "CsvFile", "Table", "reason"]

#: Rows `CsvFile.peek` reads of a streamed file.
PEEK_ROWS = 1000


@dataclass(frozen=True)
class Table:
    """The checked contents of the file: features (a frame, or a text series) and labels."""

    features: pd.DataFrame | pd.Series
    label_frame: pd.DataFrame
    columns: Columns


@dataclass(frozen=True)
class CsvFile:
    """The file of a csv workload and the options that say how to read it (``path``, ``label``,
    ``text_column``, as given: either may be None until the file is read)."""

    path: str | None
    label: str | None
    text_column: str | None
    kind: TaskKind

    @property
    def file_name(self) -> str:
        return Path(self.path or "").name

    def location(self) -> Path:
        """The file's path, ``~`` expanded; `FieldError` on ``path`` when none is given."""
        if self.path is None:
            raise problem("path", "the csv workload needs a file; give its path")
        return Path(self.path).expanduser()

    def label_option(self) -> str:
        """Option ``label``; `FieldError` on ``label`` when none is given."""
        if self.label is None:
            raise problem("label", "the csv workload needs the label column; give its name")
        return self.label

    def read(self, **kwargs: Any) -> pd.DataFrame:
        """The parsed file (``kwargs`` for `pandas.read_csv`), or `FieldError` saying why not."""
        path = self.location()
        try:
            return pd.read_csv(path, **kwargs)
        except OSError as exc:
            raise self.unreadable(exc.strerror or str(exc)) from None
        except UnicodeDecodeError as exc:
            raise self.unreadable(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
            raise self.unreadable(reason(exc)) from None

    def unreadable(self, why: str) -> FieldError:
        """``path: cannot read 'x.csv': WHY``."""
        return problem("path", f"cannot read {self.path!r}: {why}")

    def columns(self, header: list[str]) -> Columns:
        """Label columns (by task) and, in numeric mode, every other column as a feature."""
        labels = label_columns(self.label_option(), header, self.kind, self.file_name)
        text = self.text_column
        if text is not None:
            if text not in header:
                raise problem(
                    "text_column",
                    f"column {text!r} not in {self.file_name} "
                    f"(columns: {', '.join(map(str, header))})",
                )
            if text in labels:
                raise problem(
                    "text_column",
                    f"{text!r} is also the label column; give the text column",
                )
            return Columns(labels, ())
        features = tuple(c for c in header if c not in labels)
        if not features:
            raise problem(
                "path",
                f"{self.file_name} has no feature columns besides the label; "
                "add numeric columns, or name a text column",
            )
        return Columns(labels, features)

    def table(self) -> Table:
        """The whole file, checked: label values by task, features numeric (or the text)."""
        header = list(self.read(nrows=0).columns)
        label = self.label_option()
        named = [c for c in header if c == label or c in label.split(",")]
        frame = self.read(dtype=read_dtypes(self.kind, named))
        columns = self.columns(header)
        if frame.empty:
            raise self.no_rows()
        label_frame = frame[list(columns.labels)]
        check_labels(label_frame, self.kind, self.file_name)
        if self.text_column is not None:
            return Table(frame[self.text_column].fillna("").astype(str), label_frame, columns)
        check_features(frame[list(columns.features)], self.file_name)
        return Table(frame[list(columns.features)].astype("float64"), label_frame, columns)

    def peek(self) -> tuple[list[str], Columns]:
        """Header and columns of a streamed file, its first `PEEK_ROWS` rows checked."""
        header = list(self.read(nrows=0).columns)
        self.label_option()
        columns = self.columns(header)
        head = self.read(nrows=PEEK_ROWS, dtype=read_dtypes(self.kind, columns.labels))
        if head.empty:
            raise self.no_rows()
        check_labels(head[list(columns.labels)], self.kind, self.file_name, whole=False)
        check_features(head[list(columns.features)], self.file_name, streamed=True)
        return header, columns

    def no_rows(self) -> FieldError:
        return problem("path", f"{self.path!r} has no data rows; add rows below the header")


def reason(exc: Exception) -> str:
    """The first line of an exception's message, or its type."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
