"""Running `study` in the test process (`study.cli.main`), where a test is about what a command
does, not about the process boundary: the same directory, store, cache and module path as
`tests.cli.study` gives its subprocess, without starting a Python (and MLflow, Optuna) each time.
Trainer workers are still spawned processes, as in a real run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from study.cli import main


def study_here(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    cwd: Path,
    pythonpath: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``study ARGS`` run by `study.cli.main` in ``cwd`` (store ``cwd/mlruns``, dataset cache
    ``cwd/cache``, no inherited tracking URI or store root); ``pythonpath`` first on the module
    path, which spawned workers inherit. Its exit status, stdout and stderr as a subprocess's."""
    with monkeypatch.context() as env:
        env.chdir(cwd)
        env.delenv("MLFLOW_TRACKING_URI", raising=False)
        env.delenv("STUDY_HOME", raising=False)
        env.setenv("STUDY_CACHE_DIR", str(cwd / "cache"))
        if pythonpath is not None:
            env.syspath_prepend(str(pythonpath))
        capsys.readouterr()  # what came before is not this command's
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["study", *args], status, out, err)
