"""The csv workload's tasks: binary, multi-label and regression labels, and their bad values."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from study.config.target import Target
from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.csv import CsvWorkload
from study.workloads.task import TaskKind

WriteCsv = Callable[[str, str], Path]


def csv_workload(path: Path, **options: object) -> CsvWorkload:
    workload = get_workload("csv", {"path": str(path), **options})
    assert isinstance(workload, CsvWorkload)
    return workload


def rows(n: int, line: Callable[[int], str], header: str) -> str:
    return header + "\n" + "".join(line(i) + "\n" for i in range(n))


def _error(workload: CsvWorkload) -> str:
    with pytest.raises(UsageError) as excinfo:
        workload.validate()
    return str(excinfo.value)


# --- binary ------------------------------------------------------------------------------------


def test_binary_maps_the_larger_value_to_one(write_csv: WriteCsv) -> None:
    text = rows(40, lambda i: f"{i},{'yes' if i % 4 == 0 else 'no'}", "x,answer")
    workload = csv_workload(write_csv("b.csv", text), label="answer", task="binary")
    data = workload.load()
    assert workload.class_names == ("no", "yes")
    assert data.num_classes == 1
    assert data.y_train.dtype == np.float32 and data.y_train.ndim == 1
    y = np.concatenate([data.y_train, data.y_val])
    assert sorted(set(y.tolist())) == [0.0, 1.0]
    assert y.sum() == 10  # the ten "yes" rows are the positives
    assert np.bincount(data.y_val.astype(int)).tolist() == [6, 2]  # stratified


def test_binary_numbers_sort_numerically(write_csv: WriteCsv) -> None:
    # "10" sorts before "9" as text; as numbers 10 is the larger, so the positive class
    text = rows(20, lambda i: f"{i},{10 if i % 2 else 9}", "x,y")
    workload = csv_workload(write_csv("n.csv", text), label="y", task="binary")
    data = workload.load()
    assert workload.class_names == (9, 10)
    x = np.concatenate([data.x_train, data.x_val])[:, 0]
    y = np.concatenate([data.y_train, data.y_val])
    order = np.argsort(x)
    assert y[order].tolist() == [i % 2 for i in range(20)]


def test_binary_task_and_default_target(write_csv: WriteCsv) -> None:
    workload = csv_workload(write_csv("b.csv", "x,y\n1,a\n"), label="y", task="binary")
    assert workload.task.kind is TaskKind.BINARY
    assert workload.task.default_target == "val_auc>=0.9"
    assert "val_auc" in workload.metrics
    workload.check_target(Target.parse(workload.task.default_target))


def test_binary_with_three_values_names_them(write_csv: WriteCsv) -> None:
    text = rows(9, lambda i: f"{i},{'abc'[i % 3]}", "x,y")
    message = _error(csv_workload(write_csv("t.csv", text), label="y", task="binary"))
    assert message == (
        "workload option 'label': column 'y' in t.csv has 3 values ('a', 'b', 'c'); task binary needs "
        "exactly two (or use task multiclass)"
    )


def test_classification_takes_one_label_column(write_csv: WriteCsv) -> None:
    path = write_csv("t.csv", "x,a,b\n1,0,1\n")
    message = _error(csv_workload(path, label="a,b", task="binary"))
    assert message.startswith(
        "workload option 'label': task binary takes one label column (got 'a,b')"
    )


# --- multilabel --------------------------------------------------------------------------------


def test_multilabel_columns_become_a_label_matrix(write_csv: WriteCsv) -> None:
    text = rows(30, lambda i: f"{i},{i % 2},{int(i % 3 == 0)},{i * 0.5}", "x,odd,three,z")
    workload = csv_workload(write_csv("m.csv", text), label="odd,three", task="multilabel")
    data = workload.load()
    assert data.num_classes == 2
    assert data.input_shape == (2,)  # x and z; the label columns are not features
    assert data.y_train.shape == (24, 2) and data.y_train.dtype == np.float32
    x = np.concatenate([data.x_train, data.x_val])[:, 0]
    y = np.concatenate([data.y_train, data.y_val])[np.argsort(x)]
    expected = [[i % 2, int(i % 3 == 0)] for i in range(30)]
    assert y.tolist() == expected
    assert workload.task.default_target == "val_accuracy>=0.9"
    assert "val_exact_match" in workload.metrics


def test_multilabel_value_other_than_0_or_1(write_csv: WriteCsv) -> None:
    path = write_csv("m.csv", "x,a,b\n1,0,1\n2,1,0\n3,2,1\n")
    message = _error(csv_workload(path, label="a,b", task="multilabel"))
    assert message == (
        "workload option 'label': column 'a' in m.csv holds 2 (data row 3); task multilabel needs 0 or 1 in "
        "every label column"
    )


def test_multilabel_text_value(write_csv: WriteCsv) -> None:
    path = write_csv("m.csv", "x,a,b\n1,0,1\n2,yes,0\n")
    message = _error(csv_workload(path, label="a,b", task="multilabel"))
    assert message == (
        "workload option 'label': column 'a' in m.csv is not numeric (data row 2: 'yes'); task multilabel "
        "needs 0 or 1"
    )


def test_multilabel_unknown_column(write_csv: WriteCsv) -> None:
    path = write_csv("m.csv", "x,a,b\n1,0,1\n")
    message = _error(csv_workload(path, label="a,c", task="multilabel"))
    assert message == "workload option 'label': column 'c' not in m.csv (columns: x, a, b)"


# --- regression --------------------------------------------------------------------------------


def test_regression_label_is_standardised_with_training_statistics(write_csv: WriteCsv) -> None:
    text = rows(50, lambda i: f"{i},{1000 + 10 * i}", "x,price")
    workload = csv_workload(write_csv("r.csv", text), label="price", task="regression")
    data = workload.load()
    assert data.num_classes == 1
    assert data.y_train.shape == (40,) and data.y_train.dtype == np.float32
    np.testing.assert_allclose(data.y_train.mean(), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.y_train.std(), 1.0, atol=1e-5)
    stats = workload.stats
    assert stats is not None and stats.class_names == ()
    # the same affine map for validation rows: back to prices exactly
    prices = data.y_val * stats.label_std[0] + stats.label_mean[0]
    x = data.x_val[:, 0] * stats.feature_std[0] + stats.feature_mean[0]
    np.testing.assert_allclose(prices, 1000 + 10 * x, rtol=1e-5)
    assert workload.task.default_target == "val_mse<=0.5"


def test_regression_on_several_columns(write_csv: WriteCsv) -> None:
    text = rows(20, lambda i: f"{i},{i * 2},{-i}", "x,a,b")
    data = csv_workload(write_csv("r.csv", text), label="a,b", task="regression").load()
    assert data.num_classes == 2 and data.y_val.shape == (4, 2)


def test_regression_text_label(write_csv: WriteCsv) -> None:
    path = write_csv("r.csv", "x,y\n1,2.5\n2,3.5\n3,cheap\n")
    message = _error(csv_workload(path, label="y", task="regression"))
    assert message == (
        "workload option 'label': column 'y' in r.csv is not numeric (data row 3: 'cheap'); task regression "
        "needs numbers"
    )


# --- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"task": "ranking"},
            "workload option 'task' must be one of multiclass, binary, multilabel, "
            "regression (got 'ranking')",
        ),
        ({"streamed": "maybe"}, "workload option 'streamed' must be true or false (got 'maybe')"),
        (
            {"split": "random"},
            "workload option 'split' must be one of stratified, hash (got 'random')",
        ),
        ({"shuffle_buffer": 0}, "workload option 'shuffle_buffer' must be an integer >= 1 (got 0)"),
        (
            {"streamed": True, "text_column": "t"},
            "workload option 'streamed': text mode (a text column) reads the whole file; a "
            "streamed csv needs numeric feature columns (or set streamed=false)",
        ),
        (
            {"streamed": "true", "split": "stratified"},
            "workload option 'split': a streamed csv splits by row hash; use split=hash "
            "(or streamed=false)",
        ),
    ],
)
def test_bad_task_and_stream_options(options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("csv", {"path": "a.csv", "label": "y", **options})
    assert str(excinfo.value) == message


def test_hash_split_keeps_validation_rows_in_file_order(write_csv: WriteCsv) -> None:
    text = rows(200, lambda i: f"{i},{i % 2}", "x,y")
    workload = csv_workload(write_csv("h.csv", text), label="y", split="hash", val_fraction=0.3)
    assert not workload.streamed and workload.split == "hash"
    data = workload.load()
    x_val = data.x_val[:, 0]
    assert (np.diff(x_val) > 0).all()
    assert 40 <= len(x_val) <= 80  # ~30% of 200, not exact: each row is hashed alone
    again = csv_workload(write_csv("h.csv", text), label="y", split="hash", val_fraction=0.3)
    np.testing.assert_array_equal(again.load().x_train, data.x_train)


# --- the example tables ------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def test_example_tables_are_what_their_script_writes(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = EXAMPLES / "make_tables.py"
    subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], check=True)
    for name in ("houses.csv", "churn.csv"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes()


def test_example_tables_load_as_regression_and_binary() -> None:
    houses = csv_workload(EXAMPLES / "houses.csv", label="price_k", task="regression")
    data = houses.load()
    assert data.input_shape == (4,) and data.num_classes == 1
    assert len(data.y_train) + len(data.y_val) == 240
    churn = csv_workload(EXAMPLES / "churn.csv", label="churned", task="binary")
    data = churn.load()
    assert churn.class_names == ("no", "yes")
    assert 0.3 < np.concatenate([data.y_train, data.y_val]).mean() < 0.5  # "yes" is 1
