"""Starting trainer worker processes from one long-lived thread.

A trainer worker asks Linux to kill it when its parent dies (``PR_SET_PDEATHSIG``, so that no
orphan keeps training), and Linux sends that signal when the *thread* that started the process
ends, not the process. The study engine and ``study branch`` start workers from their trial
threads; a thread whose work ran out ended while a peer still used the worker it had started,
and that worker was killed mid-trial ("trainer worker died"). Every worker is therefore started
from this module's one thread, which lives as long as the process.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_LOCK = threading.Lock()
_SPAWNER: ThreadPoolExecutor | None = None


def start(process: Any) -> None:
    """``process.start()`` (a `multiprocessing` process) on the process-wide spawner thread;
    its exception, if any, is raised here."""
    global _SPAWNER
    with _LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="study-spawner")
        spawner = _SPAWNER
    spawner.submit(process.start).result()
