"""A workload's, model's or loss's error in the user's words: the flag on the command line
(``--csv: ...``), the file and key in a study file (``quick.yaml: workload_options.path: ...``);
one line, exit status 2, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from study.cli import main

QUICK: dict[str, Any] = {
    "name": "quick",
    "workload": "mnist1d",
    "target": "val_accuracy>=0.5",
    "budget": {"max_steps": 10},
    "trials_per_stratum": 1,
    "search_space": {"batch_size": [8], "learning_rate": {"low": 0.01, "high": 0.1}},
}


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


CLI = [
    (
        ["--workload", "csv", "--csv", "nowhere.csv", "--label", "y"],
        "study train: error: --csv: cannot read 'nowhere.csv': No such file or directory",
    ),
    (
        ["--workload", "csv", "--csv", "{csv}", "--label", "nosuch"],
        "study train: error: --label: column 'nosuch' not in x.csv (columns: a, y)",
    ),
    (
        ["--workload", "images", "--workload-option", "path=nowhere"],
        "study train: error: --workload-option path: no such directory 'nowhere'",
    ),
    (
        ["--workload", "tfrecord", "--workload-option", "train=nowhere-*.tfrecord"],
        "study train: error: --workload-option ",
    ),
    (
        ["--model", "nosuchmodel"],
        "study train: error: --model: unknown model 'nosuchmodel' for workload 'mnist1d'",
    ),
    (
        ["--model", "no_such_module_q9:build"],
        "study train: error: --model: cannot find module 'no_such_module_q9'",
    ),
    (["--loss", "mae"], "study train: error: --loss: loss 'mae' does not suit a multiclass task"),
]


@pytest.mark.parametrize(
    ("argv", "expected"),
    CLI,
    ids=["csv-path", "csv-label", "images", "tfrecord", "model", "model-module", "loss"],
)
def test_the_command_line_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    csv = tmp_path / "x.csv"
    csv.write_text("a,y\n1,0\n2,1\n3,0\n4,1\n", encoding="utf-8")
    args = [a.format(csv=csv) for a in argv]
    message = error_line(capsys, ["train", "--no-track", *args])
    assert message.startswith(expected), message


FILE = [
    (
        {"workload": "csv", "workload_options": {"path": ["a.csv"], "label": "y"}},
        "workload_options.path: expected a file path (got ['a.csv'])",
    ),
    (
        {"workload": "csv", "workload_options": {"path": "a.csv", "label": ""}},
        "workload_options.label: expected a column name (got an empty string)",
    ),
    (
        {"workload": "images", "workload_options": {"path": "x", "channels": 2}},
        "workload_options.channels must be 1 or 3 (got 2)",
    ),
    ({"workload": "tfrecord", "workload_options": {"train": 3}}, "workload_options.train"),
    ({"model": "nosuchmodel"}, "model: unknown model 'nosuchmodel' for workload 'mnist1d'"),
    ({"loss": "mae"}, "loss: loss 'mae' does not suit a multiclass task"),
    ({"loss": "no_module"}, "loss: unknown loss 'no_module'"),
]


@pytest.mark.parametrize(
    ("changes", "expected"),
    FILE,
    ids=["csv-path", "csv-label", "images", "tfrecord", "model", "loss", "loss-name"],
)
def test_a_study_file_names_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump({**QUICK, **changes}), encoding="utf-8")
    message = error_line(capsys, ["run", str(path), "--storage", str(tmp_path / "j.log")])
    assert message.startswith(f"study run: error: {path}: {expected}"), message
