"""How the report writes numbers, intervals, confidence levels, lists, sentences and paths."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.report.formatting import (
    ci_text,
    display_path,
    display_storage,
    fmt,
    interval_text,
    join_words,
    percent,
    r_squared_text,
    sentence,
)


def test_lists_and_sentences() -> None:
    assert join_words([8, 32.0, np.float64(128)]) == "8, 32, 128"
    assert join_words(pd.Series([8.0, 16.0, 32.0]), last=" and ") == "8, 16 and 32"
    assert join_words(["adam", "sgd", "momentum"], last=" or ") == "adam, sgd or momentum"
    assert join_words([]) == "" and join_words(["adam"]) == "adam"
    assert sentence(" excluded 2 trials ") == "Excluded 2 trials."
    assert sentence("Done!") == "Done!"


def test_fmt_gives_three_significant_digits() -> None:
    assert fmt(1.0199) == "1.02" and fmt(0.4567) == "0.457"
    assert fmt(0.017168) == "0.0172"
    assert fmt(396.78) == "397" and fmt(22.406) == "22.4"
    assert fmt(4333.7) == "4330" and fmt(43337.2) == "43,300" and fmt(9999.6) == "10,000"
    assert fmt(3e-7) == "3.00e-07" and fmt(1e12) == "1.00e+12"


def test_fmt_keeps_counts_whole() -> None:
    assert fmt(1170.0) == "1170"
    assert fmt(20992.0) == "20,992"
    assert fmt(np.int64(128)) == "128"


def test_fmt_passes_text_booleans_and_missing_values_through() -> None:
    assert fmt(math.inf) == "inf" and fmt(-math.inf) == "-inf"
    assert fmt(math.nan) == "-" and fmt(None) == "-" and fmt(pd.NA) == "-"
    assert fmt("mirrored:2") == "mirrored:2"
    assert fmt(np.bool_(True)) == "yes" and fmt(False) == "no"


def test_percent_follows_the_confidence() -> None:
    assert percent(0.95) == "95%"
    assert percent(0.9) == "90%"
    assert percent(0.975) == "97.5%"
    assert percent(0.68) == "68%"


def test_intervals_in_sentences_and_cells() -> None:
    assert ci_text((75.2, 601.0), 0.95) == " (95% CI 75.2 to 601)"
    assert ci_text((0.4212, 1.0199), 0.9) == " (90% CI 0.421 to 1.02)"
    assert ci_text(None, 0.95) == ""
    assert interval_text((75.2, 601.0)) == "75.2 to 601"
    assert interval_text(None) == "-"


def test_r_squared_is_never_rounded_up_to_a_perfect_fit() -> None:
    assert r_squared_text(0.9731) == "0.973"
    assert r_squared_text(0.99987) == "> 0.999"
    assert r_squared_text(1.0) == "1"


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("/home/ana/proj/search_spaces/q.yaml", "search_spaces/q.yaml"),
        ("/home/ana/other/q.yaml", "q.yaml"),
        ("/home/ana/proj", "proj"),
        ("search_spaces/./q.yaml", "search_spaces/q.yaml"),
        ("../q.yaml", "q.yaml"),
        ("<memory>", "<memory>"),
    ],
)
def test_paths_are_shown_relative_or_bare(path: str, shown: str) -> None:
    assert display_path(path, cwd="/home/ana/proj") == shown


def test_paths_default_to_the_working_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    assert display_path(tmp_path / "mlruns" / "optuna.journal") == "mlruns/optuna.journal"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://user:secret@db.example:5432/study", "postgresql://user:***@db.example:5432/study"),
        ("postgresql://user@db.example/study", "postgresql://user@db.example/study"),
        ("mysql+pymysql://u:p%40ss@h/db?password=x&charset=utf8", "mysql+pymysql://u:***@h/db?password=***&charset=utf8"),
        ("sqlite:////home/ana/proj/mlruns/s.db", "sqlite:///mlruns/s.db"),
        ("sqlite:////var/lib/s.db", "sqlite:///s.db"),
        ("sqlite:///mlruns/s.db", "sqlite:///mlruns/s.db"),
        ("/home/ana/proj/mlruns/optuna.journal", "mlruns/optuna.journal"),
        ("/srv/shared/optuna.journal", "optuna.journal"),
    ],
)  # fmt: skip
def test_storage_urls_hide_passwords_and_machine_paths(url: str, shown: str) -> None:
    assert display_storage(url, cwd="/home/ana/proj") == shown
