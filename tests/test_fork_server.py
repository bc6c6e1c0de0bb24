"""`tests.fork_server`: a host forked from the zygote forks its trainer workers' server off
itself, and the workers that server forks are those a started server would fork."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from study.runner import spawning
from tests.waiting import wait_until
from tests.zygote import ROOT, zygote

pytestmark = pytest.mark.skipif(
    spawning.start_method() != "forkserver", reason="workers are forked on Linux only"
)

#: A host that says whether it has a forkserver, and whose child that server is.
_SERVER_PROBE = """
import json, os, sys
from multiprocessing import forkserver
pid = forkserver._forkserver._forkserver_pid
parent = None
if pid is not None:
    parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
open(sys.argv[1], "w").write(json.dumps({"pid": os.getpid(), "server": pid, "parent": parent}))
"""


def test_a_process_that_imported_tensorflow_forks_its_server(tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    host = zygote().spawn(
        [str(out)], cwd=tmp_path, env=env, stdout=tmp_path / "out", stderr=tmp_path / "err",
        module="tests.fork_probe",
    )  # fmt: skip
    assert host.wait(120) == 0, (tmp_path / "err").read_text()[-2000:]
    report = json.loads(out.read_text())
    assert report["with_thread"] is False  # a second thread: the server starts afresh
    assert report["forkable"] is True
    assert report["server_parent"] == report["pid"]
    assert report["same_command"]  # forked off the host, not a fresh interpreter
    assert report["held_here"] and not report["held_by_server"]  # only what it is given
    assert report["exitcode"] == 0
    assert report["worker"] == {"parent": report["server"], "sum": 3.0, "main": "__mp_main__"}
    assert report["after_runtime"] is False  # TensorFlow's threads would not survive a fork
    wait_until(lambda: ended(report["server"]), 30, "the end of the server with its host")


@pytest.mark.parametrize("asked", [True, False])
def test_a_host_forks_its_server_as_it_starts_when_asked(tmp_path: Path, asked: bool) -> None:
    script, out = tmp_path / "host.py", tmp_path / "host.json"
    script.write_text(_SERVER_PROBE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    host = zygote().spawn(
        [str(out)], cwd=tmp_path, env=env, stdout=tmp_path / "out", stderr=tmp_path / "err",
        module=str(script), fork_server=asked,
    )  # fmt: skip
    assert host.wait(120) == 0, (tmp_path / "err").read_text()[-2000:]
    report = json.loads(out.read_text())
    if asked:
        assert report["parent"] == report["pid"]  # forked off the host itself
    else:
        assert report["server"] is None  # started afresh by the first worker, if any


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie nobody reaps)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
