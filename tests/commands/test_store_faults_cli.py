"""A damaged or full store, met by real studies: a torn or damaged ledger (the journal), a
damaged MLflow store and a disk that fills during a study each end in one line that names
the file and what to do (exit 2, or 75 for a full disk: free space, then `study resume`);
no finished trial is lost, and each repair the line gives works.

A study of 4 trials runs 2 (`started`); each test damages a copy of its store and runs the
commands on it. The full disk is a small tmpfs mounted on the store (as root); where mounting
is not permitted, the file size limit (RLIMIT_FSIZE) of the `study` process stands in for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from study.ledger import Ledger
from study.ledger.journal import damaged_line
from tests.cli import study

pytestmark = pytest.mark.slow

NAME = "faults"
STUDY: dict[str, Any] = {
    "name": NAME,
    "workload": "tabular",
    "workload_options": {"rows": 1500},
    "target": "val_accuracy>=0.85",
    "budget": {"max_steps": 400},
    "eval_every": 10,
    "trials_per_stratum": 4,
    "search_space": {
        "batch_size": [128],
        "learning_rate": {"low": 1.0e-2, "high": 0.3, "scale": "log"},
        "strategy": ["default"],
    },
}
FILE = f"{NAME}.yaml"
#: Optuna's journal: the operation that sets a trial's state, and the states that close it.
SET_TRIAL_STATE = 6
COMPLETE, PRUNED = 1, 2


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose store holds `STUDY` with 2 of its 4 trials finished."""
    cwd = tmp_path_factory.mktemp("started")
    (cwd / FILE).write_text(yaml.safe_dump(STUDY, sort_keys=False), encoding="utf-8")
    result = study("run", FILE, "--tuner", "optuna", "--max-trials", "2", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(finished(cwd)) == 2
    return cwd


def copy_of(started: Path, tmp_path: Path) -> Path:
    cwd = tmp_path / "study"
    shutil.copytree(started, cwd, symlinks=True)
    return cwd


def finished(cwd: Path) -> set[tuple[int, str, int | None]]:
    """The study's finished trials (closed, with a result): number, status, steps to the
    target."""
    ledger = Ledger.open(str(cwd / "mlruns" / "optuna.journal"), NAME, create=False)
    return {
        (t.number, t.status.value, t.result.steps_to_target if t.result else None)
        for stratum in ledger.strata()
        for t in ledger.trials(stratum)
        if not t.open and t.result is not None and t.status.value != "failed"
    }


def mlflow_trials(cwd: Path) -> set[int]:
    """The numbers of the trials with a finished MLflow run."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{cwd / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(NAME)
    runs = client.search_runs([experiment.experiment_id])
    return {
        int(r.data.tags["study.trial"].rpartition("#")[2])
        for r in runs
        if r.data.tags.get("study.role") == "trial" and r.info.status == "FINISHED"
    }


def one_error(result: subprocess.CompletedProcess[str], status: int, *fragments: str) -> str:
    """Exit ``status``, no traceback, and one error line on stderr naming ``fragments``."""
    assert result.returncode == status, (result.stdout[-2000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_torn_ledger_is_mended_by_the_next_run_and_loses_nothing(
    started: Path, tmp_path: Path
) -> None:
    cwd = copy_of(started, tmp_path)
    journal = cwd / "mlruns" / "optuna.journal"
    os.truncate(journal, journal.stat().st_size - 40)  # the last record cut short
    kept = finished(cwd)
    assert kept  # what a reader sees: the records before the torn one

    assert study("status", NAME, cwd=cwd).returncode == 0
    result = study("resume", NAME, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "torn record" in line]
    assert len(warnings) == 1 and "mlruns/optuna.journal.torn" in warnings[0]
    assert "Traceback" not in result.stderr
    assert kept <= finished(cwd)
    assert len(finished(cwd)) == 4  # the study went on to its end
    assert damaged_line(journal) is None


def test_a_damaged_ledger_is_one_line_and_its_intact_records_are_kept(
    started: Path, tmp_path: Path
) -> None:
    cwd = copy_of(started, tmp_path)
    journal = cwd / "mlruns" / "optuna.journal"
    lines = journal.read_bytes().splitlines(keepends=True)
    at = len(lines) - 8  # a record of the second trial, before it closed
    lines[at] = lines[at][:20] + b"\x00" * 30 + b"\n"
    journal.write_bytes(b"".join(lines))
    closed_before = [  # the trials closed (complete or pruned) before it
        log["trial_id"]
        for log in map(json.loads, lines[:at])
        if log["op_code"] == SET_TRIAL_STATE and log["state"] in (COMPLETE, PRUNED)
    ]
    before = digest(journal)

    commands = (["ls"], ["status", NAME], ["report", NAME, "--out", "r"], ["resume", NAME])
    for argv in [*commands, ["run", FILE]]:
        line = one_error(study(*argv, cwd=cwd), 2, "mlruns/optuna.journal is damaged")
        assert f"line {at + 1} (byte" in line and "head -n" in line
    assert digest(journal) == before  # nothing written

    advice = line.split("keep those records: `")[1].split("`")[0]
    subprocess.run(advice, shell=True, check=True, cwd=cwd)
    kept = finished(cwd)
    assert len(kept) == len(closed_before) == 1  # the trials that closed before it
    assert kept <= finished(started)
    result = study("resume", NAME, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    assert kept <= finished(cwd) and len(finished(cwd)) == 4


def test_a_damaged_mlflow_store_is_one_line_and_rebuilt_from_the_ledger(
    started: Path, tmp_path: Path
) -> None:
    cwd = copy_of(started, tmp_path)
    db, journal = cwd / "mlruns" / "mlflow.db", cwd / "mlruns" / "optuna.journal"
    with open(db, "r+b") as f:
        f.write(b"\x00" * 100)  # its header gone ...
    for log in ("mlflow.db-wal", "mlflow.db-shm"):  # ... and its write-ahead log with it
        (cwd / "mlruns" / log).unlink(missing_ok=True)
    before, kept = digest(journal), finished(cwd)

    assert study("status", NAME, cwd=cwd).returncode == 0  # the ledger alone answers
    for argv in (["resume", NAME], ["run", FILE]):
        line = one_error(study(*argv, cwd=cwd), 2, "MLflow store mlruns/mlflow.db is damaged")
        assert "mv mlruns/mlflow.db mlruns/mlflow.db.damaged" in line
    assert digest(journal) == before

    (cwd / "mlruns" / "mlflow.db").rename(cwd / "mlruns" / "mlflow.db.damaged")
    result = study("resume", NAME, "--max-trials", "1", cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    assert kept <= finished(cwd)
    assert mlflow_trials(cwd) == {number for number, _, _ in finished(cwd)}


@contextlib.contextmanager
def small_disk(where: Path, size: str = "8m") -> Iterator[bool]:
    """A tmpfs of ``size`` mounted on ``where`` (True), or False where mounting is not
    permitted; unmounted at the end."""
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    try:
        yield mounted.returncode == 0
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> Path:
    """A file that takes all the free space of ``disk`` but ``leave`` bytes."""
    stat = os.statvfs(disk)
    ballast = disk / "ballast"
    with open(ballast, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, stat.f_bavail * stat.f_frsize - leave)
    return ballast


def limited(cwd: Path, limit: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m study ARGS`` in ``cwd`` whose files cannot grow past ``limit`` bytes."""
    import resource
    import signal

    def limit_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    env["STUDY_CACHE_DIR"] = str(cwd / "cache")
    return subprocess.run(
        [sys.executable, "-m", "study", *args],
        cwd=cwd,
        env=env,
        preexec_fn=limit_files,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_disk_that_fills_during_a_study_loses_nothing_and_resume_goes_on(
    started: Path, tmp_path: Path
) -> None:
    cwd = copy_of(started, tmp_path)
    store = cwd / "mlruns"
    shutil.rmtree(store)
    store.mkdir()
    with small_disk(store) as mounted:
        shutil.copytree(started / "mlruns", store, dirs_exist_ok=True)
        kept = finished(cwd)
        if mounted:  # room for about one more trial
            ballast = fill(store, leave=16 * 1024)
            result = study("resume", NAME, cwd=cwd)
        elif sys.platform.startswith("linux"):
            result = limited(cwd, (store / "optuna.journal").stat().st_size + 4096, "resume", NAME)
        else:
            pytest.skip("neither a tmpfs mount nor RLIMIT_FSIZE to fill a disk with here")
        one_error(result, 75, "no space left for mlruns/", "free space", "study resume")
        assert damaged_line(store / "optuna.journal") is None  # whole: the write was undone
        assert (store / "optuna.journal").read_bytes().endswith(b"\n")
        assert kept <= finished(cwd)

        if mounted:
            ballast.unlink()  # space freed
        result = study("resume", NAME, cwd=cwd)
        assert result.returncode == 0, result.stderr[-3000:]
        assert kept <= finished(cwd) and len(finished(cwd)) == 4
        assert mlflow_trials(cwd) == {number for number, _, _ in finished(cwd)}
