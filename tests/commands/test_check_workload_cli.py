"""`study check-workload` on the README's own workload: a summary and exit 0, or one line
naming the flag and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli import study

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_example() -> str:
    """The custom workload of the README's Concepts section, as written there."""
    text = README.read_text(encoding="utf-8")
    start = text.index("# my_workloads.py")
    return text[start : text.index("```", start)]


def _write(tmp_path: Path) -> Path:
    (tmp_path / "my_workloads.py").write_text(_readme_example())
    return tmp_path


def test_a_good_workload_prints_a_summary(tmp_path: Path) -> None:
    proc = study(
        "check-workload", "my_workloads:Blobs", "--samples", "200", "--batch-size", "16", "--json",
        cwd=tmp_path, pythonpath=_write(tmp_path), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["workload"], report["train_rows"], report["val_rows"]) == ("blobs", 160, 40)
    assert report["parameters"] == 354 and "val_loss" in report["metrics"]


def test_a_bad_option_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    proc = study(
        "check-workload", "my_workloads:Blobs", "--samples", "5",
        cwd=tmp_path, pythonpath=_write(tmp_path), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "study check-workload: error: --samples must be an integer >= 100 (got 5)"
    )


def test_checks_before_training_import_no_tensorflow(tmp_path: Path) -> None:
    code = (
        "import sys; from study.cli import main; "
        "status = main(['check-workload', 'digits', '--workload-option', 'seed=-1']); "
        "print(status, 'tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["2", "False"]
    assert "seed must be an integer >= 0" in out.stderr


def test_the_workload_is_named_once(tmp_path: Path) -> None:
    proc = study("check-workload", "tabular", "--workload", "digits", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "study check-workload: error: WORKLOAD 'tabular' and --workload "
        "'digits' disagree; name the workload once"
    )
