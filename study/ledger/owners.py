"""Who runs a trial: ``host:pid:start-time`` of the claiming process, and whether it still runs."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def owner_id() -> str:
    """This process as a trial owner (the start time guards against pid reuse)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def owner_alive(owner: str | None) -> bool:
    """Whether the process that claimed a trial still runs (other hosts are assumed alive)."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return _process_start(pid) == start


def _process_start(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"
