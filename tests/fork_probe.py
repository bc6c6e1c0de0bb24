"""A host for `tests.test_fork_server`: forks its forkserver, then starts a worker.

Run as ``python -m tests.fork_probe OUT`` forked from the tests' zygote (which has
imported TensorFlow without starting its runtime). It writes to OUT, as JSON, what a test
checks: whether the process could fork its server with a second thread running, once it
ended and once TensorFlow's runtime started; the server's parent, command line and open files;
what the worker saw.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path

from tests.waiting import wait_until


def target(path: str) -> None:
    """A worker's target: compute with TensorFlow and say which process forked it."""
    import tensorflow as tf

    total = float(tf.reduce_sum(tf.ones(3)))
    Path(path).write_text(json.dumps({"parent": os.getppid(), "sum": total, "main": __name__}))


def files(pid: int) -> list[str]:
    """What process ``pid``'s descriptors above 2 point to, as ``/proc`` names them."""
    found = []
    for fd in list(Path(f"/proc/{pid}/fd").iterdir()):
        if int(fd.name) > 2:
            with contextlib.suppress(FileNotFoundError):  # the listing's own, closed since
                found.append(os.readlink(fd))
    return sorted(found)


def main(out: Path) -> None:
    from multiprocessing import forkserver

    from study.runner import spawning
    from tests import fork_server

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    with_thread = fork_server.forkable()
    stop.set()
    other.join()
    # The thread's end is seen by Python before the system has reaped it.
    wait_until(lambda: len(os.listdir("/proc/self/task")) == 1, 30, "the thread's end", 0.01)
    held = open(out.with_suffix(".held"), "w")  # noqa: SIM115  (open while the server forks)
    forkable = fork_server.forkable()
    fork_server.fork_server()
    server = forkserver._forkserver._forkserver_pid
    stat = Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()
    worker_out = out.with_suffix(".worker")
    worker = spawning.process(target, (str(worker_out),), name="study-probe")
    spawning.start(worker)
    worker.join(60)
    report = {
        "with_thread": with_thread,
        "forkable": forkable,
        "server": server,
        "server_parent": int(stat[1]),
        "same_command": Path(f"/proc/{server}/cmdline").read_bytes()
        == Path("/proc/self/cmdline").read_bytes(),
        "held_by_server": held.name in files(server),
        "held_here": held.name in files(os.getpid()),
        "exitcode": worker.exitcode,
        "worker": json.loads(worker_out.read_text()),
        "pid": os.getpid(),
    }
    import tensorflow as tf

    tf.constant(1.0)  # TensorFlow's runtime starts, with threads of its own
    report["after_runtime"] = fork_server.forkable()
    out.write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
