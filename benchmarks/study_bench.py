"""Shared by the study-level benchmarks: run ``study run`` in a process of its own, as a user
does, with its ledger and MLflow store under a given directory. Not a benchmark itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def run_study(
    file: Path, workdir: Path, *flags: str, quiet: bool = True
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``study run FILE FLAGS`` in ``workdir`` with ``STUDY_HOME=workdir/mlruns``; return the
    finished process (its output captured when ``quiet``) and its wall seconds. Exits with the
    end of its stderr when it fails."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(STUDY_HOME=str(workdir / "mlruns"), TF_CPP_MIN_LOG_LEVEL="2")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "study", "run", str(file), *flags],
        cwd=workdir,
        env=env,
        capture_output=quiet,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"study run exited with {done.returncode}:\n{(done.stderr or '')[-3000:]}")
    return done, seconds


#: ``allocation`` for a comparison of 8 trials per batch size: the question files state a budget
#: of training steps (``benchmarks/mnist1d_compute.yaml``), which these comparisons replace.
EVEN = {"mode": "even"}

#: The studies the per-study comparisons run by default: the quickstart and the MNIST-1D question.
DEFAULT_FILES = (
    Path(__file__).resolve().parent.parent / "search_spaces" / "quickstart.yaml",
    Path(__file__).resolve().parent / "mnist1d_compute.yaml",
)


def run_variant(
    file: Path, workdir: Path, suffix: str, *, flags: tuple[str, ...] = (), **changes: object
) -> str:
    """Run the study of ``file`` with top-level keys changed, named ``<name>-<suffix>``, in
    ``workdir`` (``study run`` given ``flags`` too); return its name (its ledger is
    ``workdir/mlruns/optuna.journal``)."""
    import yaml

    config = yaml.safe_load(file.read_text())
    config.update(changes)
    config["name"] = f"{config['name']}-{suffix}"
    copy = workdir / f"{config['name']}.yaml"
    copy.write_text(yaml.safe_dump(config, sort_keys=False))
    run_study(copy, workdir, *flags)
    return config["name"]


def finished_trials(workdir: Path, name: str) -> dict[int, list]:
    """The finished trials (with a result) of study ``name`` in ``workdir``'s ledger, by batch
    size."""
    from study.ledger import Ledger

    ledger = Ledger.open(str(workdir / "mlruns" / "optuna.journal"), name, create=False)
    return {
        stratum.batch_size: [t for t in ledger.trials(stratum) if t.result is not None]
        for stratum in ledger.strata()
    }


def best_steps(trials: list) -> int | None:
    """The fewest steps to target among ``trials`` (None if none reached)."""
    reached = [t.result.steps_to_target for t in trials if t.result.steps_to_target]
    return min(reached) if reached else None
