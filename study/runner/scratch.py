"""A trainer worker's own temporary directory, removed when the worker ends.

TensorFlow's autograph writes every function it converts to a temporary module file and
deletes it only from an ``atexit`` handler, which a `multiprocessing` worker never runs (it
leaves through ``os._exit``); one quickstart study left 16 such files in ``/tmp``, a day of
studies thousands. So a worker writes its temporary files into a directory of its own
(`own_tempdir`: ``tempfile.tempdir`` and ``TMPDIR`` point there), under the temporary
directory of the environment it was started with, and removes it when its target returns.
A worker that was killed cannot: the next worker to start on the same host removes the
directories of workers that are no longer running (`sweep`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: The prefix of a worker's temporary directory: ``study-worker-<host>-<pid>-<random>``.
PREFIX = "study-worker-"


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep(base: Path) -> list[Path]:
    """Remove the worker directories under ``base`` that this user's workers on this host left
    behind (their process is gone); return them. Others' and live workers' are kept.

    Example: ``study-worker-h-4242-x1`` is removed when no process 4242 runs on host ``h``.
    """
    mine = f"{PREFIX}{_host()}-"
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.name.startswith(mine) or not entry.is_dir(follow_symlinks=False):
                continue
            pid = entry.name[len(mine) :].split("-", 1)[0]
            if not pid.isdigit() or _running(int(pid)):
                continue
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                    continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def own_tempdir() -> Iterator[Path]:
    """This process' temporary files go to a new directory while the block runs (under the
    environment's ``TMPDIR``, read afresh: a forked worker may hold its server's), which is
    removed afterwards; directories that ended workers left are swept first."""
    tempfile.tempdir = None  # read TMPDIR of the environment this worker was given
    base = Path(tempfile.gettempdir())
    sweep(base)
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{_host()}-{os.getpid()}-", dir=base))
    before = os.environ.get("TMPDIR")
    tempfile.tempdir = str(path)
    os.environ["TMPDIR"] = str(path)
    try:
        yield path
    finally:
        tempfile.tempdir = None
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        shutil.rmtree(path, ignore_errors=True)
