"""A newcomer's first commands: the shipped examples (`study run --example`, `study init`),
user modules imported from the working directory by the installed ``study`` script (not only
under ``python -m``, which puts the folder on the path itself), and where studies are stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study import examples
from study.cli import main as cli
from study.config.studyfile import load_study_file

ROOT = Path(__file__).resolve().parents[2]
#: The console script pip installed beside this interpreter (what a user types).
SCRIPT = Path(sys.executable).parent / "study"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    return tmp_path


def script(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The installed ``study`` script in ``cwd``: no PYTHONPATH, no store settings inherited."""
    drop = ("PYTHONPATH", "MLFLOW_TRACKING_URI", "STUDY_HOME")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_every_shipped_example_is_a_valid_study_file_linked_from_search_spaces() -> None:
    assert examples.names() == [
        "mnist1d_cnn", "mnist1d_mlp", "quickstart", "shapes_resnet", "tabular_strategies"
    ]  # fmt: skip
    for name in examples.names():
        assert load_study_file(examples.path(name)).source.endswith(f"{name}.yaml")
        # One copy: the checkout's search_spaces/NAME.yaml is a link to the packaged file.
        assert (ROOT / "search_spaces" / f"{name}.yaml").resolve() == examples.path(name)


def test_an_unknown_example_is_one_line_naming_the_known_ones(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args, message in (
        (["--example", "quick"], "--example: unknown example 'quick'; choose from mnist1d_cnn, "
         "mnist1d_mlp, quickstart, shapes_resnet, tabular_strategies"),
        ([], "give a study file, or --example NAME (e.g. --example quickstart)"),
        (["q.yaml", "--example", "quickstart"], "give a study file or --example NAME, not both"),
    ):  # fmt: skip
        assert cli(["run", *args]) == 2
        out, err = capsys.readouterr()
        assert (out, err) == ("", f"study run: error: {message}\n")
    assert list(work.iterdir()) == []


def test_init_writes_a_study_and_its_model_and_never_overwrites(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["init", "my-study"]) == 0
    out = capsys.readouterr().out
    assert "study run my-study.yaml" in out
    assert sorted(p.name for p in work.iterdir()) == ["my-study.yaml", "my_study_model.py"]
    config = load_study_file(work / "my-study.yaml")
    quickstart = load_study_file(examples.path("quickstart"))
    assert (config.name, config.model) == ("my-study", "my_study_model:build")
    assert config.space == quickstart.space and config.target == quickstart.target
    written = (work / "my-study.yaml").read_text()
    assert yaml.safe_load(written)["model"] == "my_study_model:build"
    assert (work / "my_study_model.py").read_text() == examples.STARTER_MODEL.read_text()
    (work / "my-study.yaml").write_text("mine")
    (work / "my_study_model.py").unlink()
    assert cli(["init", "my-study"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "study init: error: my-study.yaml already exists here; choose another NAME or move it "
        "away\n"
    )
    assert (work / "my-study.yaml").read_text() == "mine"  # nothing written, nothing replaced
    assert not (work / "my_study_model.py").exists()


@pytest.mark.slow
def test_the_script_imports_a_workload_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "my_digits.py").write_text(
        "from study.workloads.digits import DigitsWorkload\n\n\n"
        "class Digits(DigitsWorkload):\n    pass\n"
    )
    done = script("check-workload", "my_digits:Digits", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["workload"] == "digits"


@pytest.mark.slow
def test_an_initialised_study_runs_its_model_in_trainer_workers(tmp_path: Path) -> None:
    # `study init`, then `study run` in that folder: the trainer workers import the model
    # module from it too; `study run` and `study ls` say where the study is stored.
    assert script("init", "first", cwd=tmp_path).returncode == 0
    ran = script("run", "first.yaml", "--trials", "2", "--tuner", "optuna", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    store = "mlruns/ (the default: ./mlruns; set STUDY_HOME to keep studies elsewhere)"
    assert ran.stdout.splitlines()[0] == f"study first: stored in {store}"
    assert "[2/2 " in ran.stdout  # both trials ran, in trainer workers
    listed = script("ls", cwd=tmp_path)
    assert listed.stdout.splitlines()[-1] == f"stored in {store}"
    assert listed.stdout.splitlines()[1].split()[:2] == ["first", "2/2"]
