"""Branch trials across hosts with no shared disk: one host trains the reference and leaves,
its folder is deleted, and a second host, sharing only PostgreSQL and an MLflow server, claims
every branch and loads each checkpoint from the server's artifact store. A checkpoint missing
from the store is one line and exit 2, with no branch claimed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from study.ext.branch.ledger import BranchLedger
from tests.ext.branch.test_command import TINY
from tests.inprocess import study_here
from tests.services import mlflow_server, postgresql_server

pytestmark = pytest.mark.slow


def host(root: Path, name: str, study_name: str) -> tuple[Path, Path]:
    """A host's own folder with its copy of the study file."""
    folder = root / name
    folder.mkdir()
    file = folder / "tiny.yaml"
    data = {**TINY, "name": study_name}
    file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder, file


def test_a_second_host_loads_the_checkpoints_from_the_shared_services(
    tmp_path: Path,
    dispose_engines: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each host is a command in this test's process, one after the other: what they share is
    what the services hold (host A's folder is deleted before host B starts)."""

    def study(*args: str, cwd: Path):
        return study_here(monkeypatch, capsys, *args, cwd=cwd)

    services = tmp_path / "services"
    with postgresql_server() as pg, mlflow_server(services / "mlflow") as uri:
        storage = pg.create_database()
        shared = ("--storage", storage, "--tracking-uri", uri)

        first, file = host(tmp_path, "a", "two-hosts")
        result = study("branch", str(file), *shared, "--max-branches", "0", cwd=first)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "18 branches left to other processes (waiting)" in result.stdout
        shutil.rmtree(first)  # host A is gone: nothing of it is on any disk B can read

        second, file = host(tmp_path, "b", "two-hosts")
        result = study("branch", str(file), *shared, "--json", "--workers", "2", cwd=second)
        assert result.returncode == 0, result.stderr[-3000:]
        out = json.loads(result.stdout)
        assert len(out["curve"]) == 3 and all(r["cbs"] >= 8 for r in out["curve"])

        tasks = BranchLedger.open(storage, "two-hosts").tasks()
        failed = [(t.number, t.error) for t in tasks if t.state != "complete"]
        assert len(tasks) == 18 and not failed, (failed, result.stderr[-3000:])
        stored = sorted(p.name for p in (services / "mlflow" / "artifacts").rglob("ckpt-*.npz"))
        assert stored == ["ckpt-0.npz", "ckpt-1.npz", "ckpt-2.npz"]  # only on the server
        assert not list(second.rglob("ckpt-*.npz"))

        # a checkpoint gone from the store: one line, exit 2, every branch left waiting
        third, file = host(tmp_path, "c", "lost-checkpoint")
        result = study("branch", str(file), *shared, "--max-branches", "0", cwd=third)
        assert result.returncode == 0, result.stderr[-3000:]
        reference = BranchLedger.open(storage, "lost-checkpoint").note("reference")
        run_id = reference["run_id"]
        lost = [
            p for p in (services / "mlflow" / "artifacts").rglob("ckpt-1.npz") if run_id in str(p)
        ]
        assert len(lost) == 1
        lost[0].unlink()
        result = study("branch", str(file), *shared, cwd=third)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1
        assert "checkpoint 'checkpoints/ckpt-1.npz' of reference run" in result.stderr
        assert "--restart" in result.stderr
        ledger = BranchLedger.open(storage, "lost-checkpoint")
        assert ledger.waiting() == 18 and ledger.running() == 0  # nothing claimed or recorded
