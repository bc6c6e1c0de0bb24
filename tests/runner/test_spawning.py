"""`study.runner.spawning`: workers forked from a TensorFlow server behave as spawned ones do:
the caller's environment and standard streams as they are when the worker starts, a server
that a signal to the process group leaves alone, and a choice of start method."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
from pathlib import Path

import pytest

from study.runner import spawning

pytestmark = pytest.mark.skipif(
    spawning.start_method() != "forkserver", reason="workers are forked on Linux only"
)


def report(path: str) -> None:
    """A worker's target: write what it inherited to ``path``, and a line to its stderr."""
    print("from the worker's stderr", file=sys.stderr, flush=True)
    preloaded = "tensorflow" in sys.modules
    ignored = ignores_sigterm(os.getpid())
    Path(path).write_text(
        f"{os.environ.get('STUDY_SPAWN_PROBE')}\n{preloaded}\n{os.getppid()}\n{ignored}"
    )


def started(target_path: Path) -> list[str]:
    process = spawning.process(report, (str(target_path),), name="study-probe")
    spawning.start(process)
    process.join(60)
    assert process.exitcode == 0
    return target_path.read_text().splitlines()


def test_a_worker_takes_the_callers_current_environment_and_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started(tmp_path / "first")  # the server is running, its environment fixed
    monkeypatch.setenv("STUDY_SPAWN_PROBE", "set after the server started")
    err = tmp_path / "stderr"
    saved = os.dup(2)
    try:
        with open(err, "w") as file:
            os.dup2(file.fileno(), 2)
            probe, preloaded, parent, ignored = started(tmp_path / "second")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    assert probe == "set after the server started"
    assert err.read_text() == "from the worker's stderr\n"
    assert preloaded == "True"  # imported once, by the server
    assert int(parent) != os.getpid()  # forked by the server, not by this process
    assert ignored == "False"  # SIGTERM's default, as in a spawned process


def where(path: str) -> None:
    """A worker's target: write its working directory and module path to ``path``."""
    Path(path).write_text(json.dumps({"cwd": os.getcwd(), "path": sys.path}))


def test_a_worker_takes_the_callers_current_folder_and_module_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `multiprocessing` hands each worker the caller's folder and module path as it starts.
    started(tmp_path / "first")  # the server is running, its folder and module path fixed
    folder, modules = tmp_path / "project", tmp_path / "modules"
    folder.mkdir()
    monkeypatch.chdir(folder)  # a user's module here imports (`study.importing`) ...
    monkeypatch.syspath_prepend(str(modules))  # ... and so does one on a path added since
    process = spawning.process(where, (str(tmp_path / "where.json"),), name="study-probe")
    spawning.start(process)
    process.join(60)
    assert process.exitcode == 0
    seen = json.loads((tmp_path / "where.json").read_text())
    assert seen["cwd"] == str(folder)
    assert seen["path"][0] == str(modules)


def ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGTERM (``SigIgn`` of /proc/PID/status)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return bool(int(fields["SigIgn"], 16) & (1 << (signal.SIGTERM - 1)))


def test_the_server_outlives_sigterm_and_keeps_forking(tmp_path: Path) -> None:
    server = int(started(tmp_path / "first")[2])
    assert ignores_sigterm(server)
    os.kill(server, signal.SIGTERM)  # as a SIGTERM to the whole process group would
    assert int(started(tmp_path / "second")[2]) == server  # the same server forked it


def test_the_start_method_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spawning.START_METHOD_ENV, "spawn")
    assert spawning.start_method() == "spawn"
    monkeypatch.setenv(spawning.START_METHOD_ENV, "")
    assert spawning.start_method() == ("forkserver" if sys.platform == "linux" else "spawn")


def test_warming_starts_the_server_and_a_worker_then_forks_from_it(tmp_path: Path) -> None:
    spawning.warm()  # returns at once; the spawner thread starts the server and reaps a no-op
    spawning.warm()  # a second warm-up (a server already up) is a cheap no-op fork
    lines = started(tmp_path / "after-warm")  # queued behind the warm-ups on the one thread
    assert lines[1] == "True"  # forked from the server that imported TensorFlow
    assert not [p for p in multiprocessing.active_children() if p.name == "study-warm"]
