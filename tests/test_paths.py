"""Where state lives, and URLs shown without their secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.errors import FieldError
from study.paths import (
    exists,
    is_file,
    journal_path,
    masked,
    sqlite_file,
    study_name,
    tracking_uri,
    where,
)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://study:s3cret@db:5432/ledger", "postgresql://study:***@db:5432/ledger"),
        ("mysql+pymysql://u:p%40ss@h/d?charset=utf8", "mysql+pymysql://u:***@h/d?charset=utf8"),
        (
            "postgresql://db/ledger?user=u&password=s3cret",
            "postgresql://db/ledger?user=u&password=***",
        ),
        ("error at postgresql://u:pw@h/d: refused", "error at postgresql://u:***@h/d: refused"),
        ("sqlite:///mlruns/optuna.db", "sqlite:///mlruns/optuna.db"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ],
)
def test_passwords_are_masked(text: str, shown: str) -> None:
    assert masked(text) == shown


def test_a_password_quoted_on_its_own_is_masked_too() -> None:
    message = 'FATAL: password authentication failed for "u" (tried "s3cret")'
    assert "s3cret" not in masked(message, "postgresql://u:s3cret@h/d")


def test_a_short_password_is_masked_as_a_word_not_inside_others() -> None:
    message = 'port 5432 failed for "u" (password p)'
    assert masked(message, "postgresql://u:p@h/d") == 'port 5432 failed for "u" (password ***)'


def test_read_only_lookups_create_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDY_HOME", str(tmp_path / "store"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert journal_path(create=False) == tmp_path / "store" / "optuna.journal"
    assert not (tmp_path / "store").exists()
    assert tracking_uri("http://example:5000") == "http://example:5000"


@pytest.mark.parametrize("name", [".", "..", "...", "a/b", "../x", "a b", ""])
def test_study_names_are_one_folder_of_their_own(name: str) -> None:
    with pytest.raises(FieldError, match=r"^name must be .*not dots alone"):
        study_name(name)


@pytest.mark.parametrize("name", ["quickstart", "v1.2", ".hidden", "a..b", "x-y_z", None])
def test_good_study_names_pass(name: str | None) -> None:
    assert study_name(name) == name


@pytest.mark.parametrize(
    ("uri", "file"),
    [
        ("sqlite:////tmp/a/mlflow.db", Path("/tmp/a/mlflow.db")),
        ("sqlite:///mlruns/mlflow.db?timeout=20", Path("mlruns/mlflow.db")),
        ("sqlite:///:memory:", None),
        ("sqlite://", None),
        ("http://127.0.0.1:5000", None),
        ("postgresql://u@h/db", None),
    ],
)
def test_sqlite_file_is_the_database_file_of_a_local_store(uri: str, file: Path | None) -> None:
    assert sqlite_file(uri) == file


def test_where_names_the_store_and_what_chose_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    default = "mlruns/ (the default: ./mlruns; set STUDY_HOME to keep studies elsewhere)"
    assert where() == default
    monkeypatch.setenv("STUDY_HOME", str(tmp_path / "elsewhere"))
    assert where() == "elsewhere/ ($STUDY_HOME)"
    monkeypatch.setenv("STUDY_HOME", "/data/studies")
    assert where() == "/data/studies/ ($STUDY_HOME)"
    assert where("postgresql://ana:pw@db/s", "http://mlflow:5000") == (
        "ledger postgresql://ana:***@db/s (--storage), MLflow runs http://mlflow:5000 "
        "(--tracking-uri)"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert where() == (
        "ledger /data/studies/optuna.journal ($STUDY_HOME), MLflow runs http://mlflow:5000 "
        "($MLFLOW_TRACKING_URI)"
    )
    assert where(runs=False) == "/data/studies/ ($STUDY_HOME)"  # `study ls` reads no runs
    monkeypatch.delenv("STUDY_HOME")
    assert where("ledger.journal", runs=False) == "ledger ledger.journal (--storage)"
    assert not (tmp_path / "mlruns").exists()  # naming the store creates nothing


def test_a_path_the_system_refuses_to_look_at_reads_as_missing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert exists(tmp_path / "f") and is_file(tmp_path / "f") and not is_file(tmp_path)
    for odd in ("x" * 300, "a\x00b", tmp_path / ("y" * 300) / "z"):
        assert not exists(odd) and not is_file(odd)  # Path.exists() raises on these
