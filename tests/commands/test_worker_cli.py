"""`study worker NAME` as a user types it: bad input is one line and exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from study.errors import UsageError
from study.runner.launch import RunOptions
from tests.cli import study


def test_a_study_that_does_not_exist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = study("worker", "nosuch", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == (
        "study worker: error: no study named 'nosuch' in this storage; "
        "`study ls` lists the studies\n"
    )
    assert not (tmp_path / "mlruns").exists()  # nothing recorded


def test_max_trials_must_be_at_least_one() -> None:
    with pytest.raises(UsageError, match=r"--max-trials must be >= 1 \(got 0\)"):
        RunOptions(max_trials=0)


def test_help_names_the_two_urls_and_the_exit_statuses(tmp_path: Path) -> None:
    result = study("worker", "--help", cwd=tmp_path)

    assert result.returncode == 0
    for words in ("--storage", "--tracking-uri", "--max-trials", "130", "143"):
        assert words in result.stdout
