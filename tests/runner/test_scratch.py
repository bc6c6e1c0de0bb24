"""`study.runner.scratch`: a worker's temporary files live in a directory of its own, removed
when it ends; a killed worker's is removed by the next worker to start."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from study.runner import scratch, spawning
from tests.waiting import wait_until


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_sweep_removes_only_this_hosts_dirs_of_ended_workers(tmp_path: Path) -> None:
    host = scratch._host()
    ended = tmp_path / f"{scratch.PREFIX}{host}-{dead_pid()}-abc"
    live = tmp_path / f"{scratch.PREFIX}{host}-{os.getpid()}-def"
    other_host = tmp_path / f"{scratch.PREFIX}elsewhere-{dead_pid()}-ghi"
    unrelated = tmp_path / "pymp-xyz"
    for path in (ended, live, other_host, unrelated):
        path.mkdir()
        (path / "__autograph_generated_file.py").write_text("x = 1\n")
    assert scratch.sweep(tmp_path) == [ended]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (live, other_host, unrelated)
    )


def test_own_tempdir_redirects_temporary_files_and_removes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    with scratch.own_tempdir() as own:
        assert own.parent == tmp_path and own.name.startswith(scratch.PREFIX)
        assert tempfile.gettempdir() == str(own) == os.environ["TMPDIR"]
        with tempfile.NamedTemporaryFile(delete=False) as file:  # as autograph writes
            assert Path(file.name).parent == own
    assert list(tmp_path.iterdir()) == []
    assert os.environ["TMPDIR"] == str(tmp_path) and tempfile.gettempdir() == str(tmp_path)


def trace(report: str) -> None:
    """A worker's target: convert a function with autograph, list its temporary directory."""
    import tensorflow as tf

    @tf.function
    def absolute(x: tf.Tensor) -> tf.Tensor:
        if x > 0:  # Python control flow: autograph converts it and writes a module file
            return x
        return -x

    absolute(tf.constant(-1.0))
    own = Path(tempfile.gettempdir())
    Path(report).write_text("\n".join([str(own), *sorted(p.name for p in own.iterdir())]))


def hang() -> None:
    """A worker's target that waits to be killed."""
    import signal

    signal.pause()


@pytest.mark.skipif(spawning.start_method() != "forkserver", reason="workers fork on Linux")
def test_a_trainer_worker_leaves_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))  # the server started with another TMPDIR
    report = tmp_path / "report"
    worker = spawning.process(trace, (str(report),), name="study-trace")
    spawning.start(worker)
    worker.join(120)
    assert worker.exitcode == 0
    own, *files = report.read_text().splitlines()
    assert Path(own).parent == base
    assert any(f.startswith("__autograph_generated_file") for f in files), files
    assert list(base.iterdir()) == []

    killed = spawning.process(hang, (), name="study-hang")
    spawning.start(killed)
    (left,) = wait_until(lambda: list(base.iterdir()), 60, "the worker's own directory")
    killed.kill()
    killed.join(60)
    assert left.exists()  # a killed worker cannot clean up ...
    worker = spawning.process(trace, (str(report),), name="study-trace")
    spawning.start(worker)
    worker.join(120)
    assert worker.exitcode == 0
    assert list(base.iterdir()) == []  # ... the next one to start does
