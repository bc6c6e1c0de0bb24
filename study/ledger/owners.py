"""Who runs a trial, and whether it still does.

A trial's owner is ``host:pid:start-time`` of the claiming process (the start time guards
against pid reuse). The host is ``$STUDY_HOST`` if set, else the hostname: set it where several
machines or containers share a hostname. On the owner's own host its process is checked
directly; from anywhere else only its heartbeat (`Beat`) tells: the time it last stamped the
trial and the grace after which it counts as dead.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The environment variable naming this host in trial owners (default: the hostname).
HOST_ENV = "STUDY_HOST"


@dataclass(frozen=True)
class Beat:
    """A trial's last heartbeat: stamped at ``at`` (Unix time, the owner's clock) by an owner
    that promised to stamp again well within ``grace`` seconds."""

    at: float
    grace: float

    def stale(self, now: float | None = None) -> bool:
        """Whether the owner missed its promise: no stamp for more than ``grace`` seconds.

        Example: ``Beat(at=100.0, grace=60.0)`` is stale from ``now=160.001`` on.
        """
        return (time.time() if now is None else now) - self.at > self.grace

    def to_stored(self) -> dict[str, float]:
        return {"at": self.at, "grace": self.grace}

    @classmethod
    def from_stored(cls, value: Any) -> Beat | None:
        """The beat stored by `to_stored`, or None (no heartbeat: an older ledger)."""
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(float(value["at"]), float(value["grace"]))
        except (KeyError, TypeError, ValueError):
            return None


def host_name() -> str:
    """This host as trial owners name it: ``$STUDY_HOST``, else the hostname."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def owner_id() -> str:
    """This process as a trial owner (the start time guards against pid reuse)."""
    return f"{host_name()}:{os.getpid()}:{_process_start(os.getpid())}"


def owner_alive(owner: str | None, beat: Beat | None = None, now: float | None = None) -> bool:
    """Whether the process that claimed a trial still runs.

    On its own host: whether that process exists (a stopped process is alive). Elsewhere:
    whether its heartbeat ``beat`` is fresh; an owner on another host with no heartbeat (a
    ledger written before heartbeats) is assumed alive.
    """
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != host_name():
        return beat is None or not beat.stale(now)
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
