"""The README's own-model example, run as a user would: ``study train --model my_model:build``
(the training run through `study.cli.main` in the test process, the bad input in one process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli import study as run
from tests.inprocess import study_each, study_here

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_model"


def study(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(*args, cwd=cwd, pythonpath=EXAMPLE)


def test_readme_shows_the_example_file_as_it_is() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(# examples/own_model/my_model\.py\n.*?)```", readme, re.S)
    assert len(blocks) == 1, "README must show examples/own_model/my_model.py once"
    shown = blocks[0].split("\n", 1)[1]
    assert shown in (EXAMPLE / "my_model.py").read_text(encoding="utf-8")
    assert "study train --workload mnist1d --model my_model:build" in readme


COMMON = ("--workload", "mnist1d", "--workload-option", "samples=2000", "--model")


def test_compiled_model_trains_to_its_own_metric_and_custom_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Through study.cli.main in this process, the example's folder on the module path.
    proc = study_here(
        monkeypatch, capsys, "train", *COMMON, "my_model:build", "--target", "val_top3>=0.8",
        "--batch-size", "64", "--lr", "0.05", "--max-steps", "1500", "--loss", "my_model:smooth_ce", "--no-track",
        "--json", cwd=tmp_path, pythonpath=EXAMPLE,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "reached"
    assert out["final"]["val_top3"] >= 0.8
    assert {"val_loss", "val_accuracy", "val_top3"} <= set(out["final"])
    assert out["environment"]["loss"] == "my_model:smooth_ce"


BAD_INPUT = [
    (["my_model:build", "--target", "val_top5>=0.9"], "--target: unknown metric 'val_top5'"),
    (["my_model:nothing"], "--model: module 'my_model' has no attribute 'nothing'"),
    (["my_model:smooth_ce"], "--model: calling my_model:smooth_ce("),
]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, Any]]:
    """Each `BAD_INPUT` case as ``study train``, in a directory of its own, all in one Python
    process with the example on PYTHONPATH (`tests.inprocess.study_each`: each command its own
    exit status, stdout and stderr, file descriptors included)."""
    root = tmp_path_factory.mktemp("bad-own-model")
    dirs = [root / str(index) for index in range(len(BAD_INPUT))]
    for directory in dirs:
        directory.mkdir()
    runs = [
        (directory, ["train", *COMMON, *args, "--max-steps", "5"])
        for directory, (args, _) in zip(dirs, BAD_INPUT, strict=True)
    ]
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(EXAMPLE), os.environ.get("PYTHONPATH")]))
    }
    return list(zip(dirs, study_each(runs, logs=root / "logs", env=env), strict=True))


@pytest.mark.parametrize(("args", "needle"), BAD_INPUT)
def test_bad_own_model_input_is_one_line_and_records_nothing(
    bad_runs: list[tuple[Path, Any]], args: list[str], needle: str
) -> None:
    directory, proc = bad_runs[BAD_INPUT.index((args, needle))]
    assert proc.args == ["study", "train", *COMMON, *args, "--max-steps", "5"]
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr
    assert not (directory / "mlruns").exists()
