"""`study.runner.spawning`: workers forked from a TensorFlow server behave as spawned ones do:
the caller's environment and standard streams as they are when the worker starts, a server
that a signal to the process group leaves alone, and a choice of start method."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import types
from pathlib import Path

import pytest

from study.runner import spawning
from tests.waiting import wait_until
from tests.zygote import ROOT, zygote

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


def test_a_process_that_imported_tensorflow_forks_its_server(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    host = zygote().spawn(
        [str(out)], cwd=tmp_path, env=env, stdout=tmp_path / "out", stderr=tmp_path / "err",
        module="tests.runner.fork_probe",
    )  # fmt: skip
    assert host.wait(120) == 0, (tmp_path / "err").read_text()[-2000:]
    report = json.loads(out.read_text())
    assert report["with_thread"] is False  # a second thread: the server starts afresh
    assert report["forkable"] is True
    assert report["command_line"] is False  # by default only `study`'s own process forks
    assert report["server_parent"] == report["pid"]
    assert report["same_command"]  # forked off the host, not a fresh interpreter
    assert report["held_here"] and not report["held_by_server"]  # only what it is given
    assert report["exitcode"] == 0
    assert report["worker"] == {"parent": report["server"], "sum": 3.0, "main": "__mp_main__"}
    assert report["after_runtime"] is False  # TensorFlow's threads would not survive a fork
    wait_until(lambda: ended(report["server"]), 30, "the end of the server with its host")


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie nobody reaps)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_only_studys_command_line_forks_unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    import study.cli

    assert not spawning.command_line()  # pytest's main module
    script = types.ModuleType("__main__")  # the `study` script: it runs `study.cli.main`
    script.main = study.cli.main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert spawning.command_line()
    module = types.ModuleType("__main__")  # ``python -m study``
    module.__spec__ = importlib.util.find_spec("study.__main__")
    monkeypatch.setitem(sys.modules, "__main__", module)
    assert spawning.command_line()
