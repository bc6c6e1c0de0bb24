"""The csv workload: numeric and text modes on small files, and every kind of bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from study.errors import UsageError
from study.workloads import get_workload
from study.workloads.csv import CsvWorkload

WriteCsv = Callable[[str, str], Path]

WORDS = {0: "bad awful dull", 1: "good great fun"}


def numeric_rows(n: int = 60) -> str:
    """Three classes named bird/cat/dog, two numeric features on different scales."""
    names = ["dog", "cat", "bird"]
    lines = ["height,weight,animal"]
    for i in range(n):
        lines.append(f"{i % 7 * 0.5},{1000 + 37 * i},{names[i % 3]}")
    return "\n".join(lines) + "\n"


def text_rows(n: int = 40) -> str:
    lines = ["id,review,stars"]
    for i in range(n):
        lines.append(f'{i},"{WORDS[i % 2]} film number {i}",{i % 2 + 4}')
    return "\n".join(lines) + "\n"


def csv_workload(path: Path, **options: object) -> CsvWorkload:
    workload = get_workload("csv", {"path": str(path), **options})
    assert isinstance(workload, CsvWorkload)
    return workload


# --- numeric mode ------------------------------------------------------------------------------


def test_numeric_mode_loads_standardised_features(write_csv: WriteCsv) -> None:
    workload = csv_workload(write_csv("animals.csv", numeric_rows()), label="animal")
    workload.validate()
    assert workload.class_names == ("bird", "cat", "dog")  # sorted
    assert workload.check_model(None) == "mlp"
    data = workload.load()
    assert data.num_classes == 3
    assert data.x_train.shape == (48, 2) and data.x_val.shape == (12, 2)
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int32
    np.testing.assert_allclose(data.x_train.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.x_train.std(axis=0), 1.0, atol=1e-5)
    assert np.bincount(data.y_val).tolist() == [4, 4, 4]  # stratified


def test_labels_map_to_sorted_class_ids(write_csv: WriteCsv) -> None:
    path = write_csv(
        "nums.csv", "x,y\n1,30\n2,10\n3,20\n4,30\n5,10\n6,20\n7,30\n8,10\n9,20\n10,30\n"
    )
    workload = csv_workload(path, label="y", val_fraction=0.3)
    data = workload.load()
    assert workload.class_names == (10, 20, 30)
    raw = np.concatenate([data.x_train, data.x_val])[:, 0]
    labels = np.concatenate([data.y_train, data.y_val])
    # x = 1..10 standardised keeps its order; class id follows y = 30, 10, 20, ...
    order = np.argsort(raw)
    assert labels[order].tolist() == [2, 0, 1, 2, 0, 1, 2, 0, 1, 2]


def test_split_is_seeded_and_deterministic(write_csv: WriteCsv) -> None:
    path = write_csv("animals.csv", numeric_rows())
    first = csv_workload(path, label="animal", seed=3).load()
    again = csv_workload(path, label="animal", seed=3).load()
    other = csv_workload(path, label="animal", seed=4).load()
    np.testing.assert_array_equal(first.x_train, again.x_train)
    np.testing.assert_array_equal(first.y_val, again.y_val)
    assert not np.array_equal(first.x_val, other.x_val)


def test_numeric_model_builds(write_csv: WriteCsv) -> None:
    workload = csv_workload(write_csv("animals.csv", numeric_rows()), label="animal")
    data = workload.load()
    net = workload.build_model("mlp", data)
    assert np.asarray(net(data.x_val[:4])).shape == (4, 3)
    with pytest.raises(UsageError, match=r"^model: 'text' needs a text column"):
        workload.check_model("text")


# --- text mode ---------------------------------------------------------------------------------


def test_text_mode_gives_token_ids(write_csv: WriteCsv) -> None:
    path = write_csv("reviews.csv", text_rows())
    workload = csv_workload(path, label="stars", text_column="review", sequence_length=8)
    assert workload.check_model(None) == "text"
    data = workload.load()
    assert workload.class_names == (4, 5)
    assert data.x_train.shape == (32, 8) and data.x_val.shape == (8, 8)
    assert data.x_train.dtype == data.x_val.dtype == np.int32
    assert data.input_shape == (8,)
    assert (data.x_train[:, :5] > 1).all()  # "good great fun film number" are known words
    assert (data.x_train[:, 5] > 0).all()  # then the review's own number
    assert (data.x_train[:, 6:] == 0).all()  # then padding


def test_vocabulary_comes_from_training_texts_only(write_csv: WriteCsv) -> None:
    # every review has its own number; the validation numbers were never adapted on
    workload = csv_workload(write_csv("r.csv", text_rows()), label="stars", text_column="review")
    data = workload.load()
    assert (data.x_val[:, 5] == 1).all()  # the number token is out of vocabulary
    assert (data.x_train[:, 5] > 1).all()


def test_empty_text_becomes_one_unknown_token(write_csv: WriteCsv) -> None:
    rows = text_rows(20) + '20,"",4\n21,"!!!",5\n'
    workload = csv_workload(
        write_csv("r.csv", rows), label="stars", text_column="review", val_fraction=0.5, seed=1
    )
    data = workload.load()
    x = np.concatenate([data.x_train, data.x_val])
    assert (x.max(axis=1) > 0).all()  # nothing left fully masked (avoids 0/0 in the average)


def test_text_model_builds(write_csv: WriteCsv) -> None:
    workload = csv_workload(
        write_csv("r.csv", text_rows()),
        label="stars",
        text_column="review",
        max_tokens=50,
        embedding_dim=4,
    )
    data = workload.load()
    net = workload.build_model("text", data)
    assert net.count_params() == 50 * 4 + (4 * 16 + 16) + (16 * 2 + 2)
    assert np.asarray(net(data.x_val[:3])).shape == (3, 2)
    with pytest.raises(UsageError, match=r"^model: 'mlp' needs numeric columns"):
        workload.check_model("mlp")


def test_text_mode_ignores_non_numeric_columns(write_csv: WriteCsv) -> None:
    rows = "city,review,stars\n" + "".join(f"Paris,{WORDS[i % 2]},{i % 2}\n" for i in range(10))
    workload = csv_workload(write_csv("r.csv", rows), label="stars", text_column="review")
    workload.validate()
    assert workload.load().x_train.dtype == np.int32


# --- bad input ---------------------------------------------------------------------------------


def _error(workload: CsvWorkload) -> str:
    with pytest.raises(UsageError) as excinfo:
        workload.validate()
    return str(excinfo.value)


def test_missing_path_option() -> None:
    assert (
        _error(CsvWorkload(label="y"))
        == "workload option 'path': the csv workload needs a file; give its path"
    )


def test_missing_label_option(write_csv: WriteCsv) -> None:
    message = _error(csv_workload(write_csv("a.csv", numeric_rows())))
    assert message.startswith("workload option 'label': the csv workload needs the label column")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    assert (
        _error(csv_workload(path, label="y"))
        == f"workload option 'path': cannot read {str(path)!r}: No such file or directory"
    )


def test_directory_is_not_readable(tmp_path: Path) -> None:
    assert _error(csv_workload(tmp_path, label="y")).endswith(": Is a directory")


def test_binary_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.csv"
    path.write_bytes(bytes(range(256)) * 8)
    message = _error(csv_workload(path, label="y"))
    assert message.startswith(f"workload option 'path': cannot read {str(path)!r}: ")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "No columns to parse from file"),
        ('a,b\n1,2\n"unterminated,3\n', "EOF"),
        ("a,b\n1,2\n1,2,3,4\n", "Error tokenizing data"),
    ],
)
def test_unparseable_text(write_csv: WriteCsv, text: str, reason: str) -> None:
    message = _error(csv_workload(write_csv("bad.csv", text), label="a"))
    assert message.startswith("workload option 'path': cannot read ")
    assert reason in message


def test_header_without_rows(write_csv: WriteCsv) -> None:
    assert "has no data rows" in _error(csv_workload(write_csv("h.csv", "a,b,c\n"), label="c"))


def test_label_column_missing(write_csv: WriteCsv) -> None:
    path = write_csv("x.csv", "a,b,c\n1,2,3\n")
    assert (
        _error(csv_workload(path, label="y"))
        == "workload option 'label': column 'y' not in x.csv (columns: a, b, c)"
    )


def test_text_column_missing(write_csv: WriteCsv) -> None:
    path = write_csv("x.csv", text_rows())
    message = _error(csv_workload(path, label="stars", text_column="body"))
    assert (
        message
        == "workload option 'text_column': column 'body' not in x.csv (columns: id, review, stars)"
    )


def test_text_column_equal_to_label(write_csv: WriteCsv) -> None:
    message = _error(
        csv_workload(write_csv("x.csv", text_rows()), label="stars", text_column="stars")
    )
    assert message.startswith("workload option 'text_column': 'stars' is also the label column")


def test_non_numeric_feature_suggests_text_column(write_csv: WriteCsv) -> None:
    path = write_csv("x.csv", "size,city,y\n1,2,a\n2,Paris,b\n3,4,a\n")
    message = _error(csv_workload(path, label="y"))
    assert message == (
        "workload option 'path': column 'city' in x.csv is not numeric (data row 2: 'Paris'); drop it, "
        "or make it the text column if it holds the text to classify"
    )


def test_missing_feature_value(write_csv: WriteCsv) -> None:
    path = write_csv("x.csv", "a,b,y\n1,2,p\n2,,q\n3,4,p\n4,,q\n")
    message = _error(csv_workload(path, label="y"))
    assert (
        message
        == "workload option 'path': column 'b' in x.csv has 2 empty value(s) (first at data row 2); "
        "fill or drop those rows"
    )


def test_missing_label_value(write_csv: WriteCsv) -> None:
    message = _error(csv_workload(write_csv("x.csv", "a,y\n1,p\n2,\n3,q\n"), label="y"))
    assert message.startswith("workload option 'label': column 'y' in x.csv has 1 empty value(s)")


def test_single_class(write_csv: WriteCsv) -> None:
    message = _error(csv_workload(write_csv("x.csv", "a,y\n1,p\n2,p\n"), label="y"))
    assert (
        message == "workload option 'label': column 'y' in x.csv has only the value 'p'; "
        "a classifier needs at least 2 classes"
    )


def test_no_feature_columns(write_csv: WriteCsv) -> None:
    message = _error(csv_workload(write_csv("x.csv", "y\np\nq\n"), label="y"))
    assert "has no feature columns besides the label" in message


def test_too_few_rows_for_a_split(write_csv: WriteCsv) -> None:
    workload = csv_workload(write_csv("x.csv", "a,y\n1,p\n2,q\n"), label="y")
    workload.validate()
    with pytest.raises(
        UsageError, match=r"x.csv has only 2 data rows, too few for a validation split of 0.2"
    ):
        workload.load()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_tokens": "many"},
            "workload option 'max_tokens' must be an integer >= 3 (got 'many')",
        ),
        (
            {"sequence_length": 0},
            "workload option 'sequence_length' must be an integer >= 1 (got 0)",
        ),
        ({"label": ""}, "workload option 'label': expected a column name (got an empty string)"),
        ({"path": ["a.csv"]}, "workload option 'path': expected a file path (got ['a.csv'])"),
    ],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(UsageError) as excinfo:
        get_workload("csv", {"path": "a.csv", "label": "y", **options})
    assert str(excinfo.value) == message
