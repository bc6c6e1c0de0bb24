"""What the storage benchmarks (study_scaleout.py, storage_load.py) count on the servers they
start: a PostgreSQL database's counters (`db_stats`), the connections open to it (`backends`),
and the CPU seconds of a server's process tree (`tree_cpu`, read from ``/proc``)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.services import PostgresServer

__all__ = ["Stats", "backends", "db_stats", "tree_cpu"]


@dataclass
class Stats:
    """Counters of one PostgreSQL database (`pg_stat_database`)."""

    xacts: int
    rows_written: int
    rows_read: int
    active_ms: float

    def __sub__(self, other: Stats) -> Stats:
        return Stats(
            self.xacts - other.xacts,
            self.rows_written - other.rows_written,
            self.rows_read - other.rows_read,
            self.active_ms - other.active_ms,
        )


def _connect(server: PostgresServer) -> Any:
    """A connection to the server's ``postgres`` database (so what it reads is not counted on
    the database measured)."""
    import psycopg

    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        dbname="postgres",
        autocommit=True,
    )


def db_stats(server: PostgresServer, database: str) -> Stats:
    """The counters of ``database``, read from another database (so this read is not
    counted), after PostgreSQL flushed its statistics."""
    time.sleep(1.5)  # backends flush their statistics at most every second
    with _connect(server) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, "
            "tup_returned + tup_fetched, active_time FROM pg_stat_database WHERE datname = %s",
            (database,),
        ).fetchone()
    assert row is not None
    return Stats(int(row[0]), int(row[1]), int(row[2]), float(row[3] or 0.0))


def backends(server: PostgresServer, database: str) -> int:
    """Connections open to ``database`` now (``pg_stat_activity``)."""
    with _connect(server) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)
        ).fetchone()
    return int(row[0]) if row else 0


def tree_cpu(marker: tuple[str, ...]) -> float:
    """CPU seconds used so far by the server whose command line holds every string of
    ``marker`` and all its descendants: their own time plus what the children they reaped used
    (PostgreSQL's exited backends, for one)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    roots = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            words = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        stats[int(entry.name)] = stat
        if all(m in words for m in marker):
            roots.add(int(entry.name))
    if not roots:
        raise RuntimeError(f"no server process with {marker} in its command line")
    tree, grew = set(roots), True
    while grew:
        children = {pid for pid, s in stats.items() if int(s[1]) in tree} - tree
        tree |= children
        grew = bool(children)
    fields = (11, 12, 13, 14)  # utime, stime, cutime, cstime
    return sum(int(stats[pid][f]) for pid in tree for f in fields) / tick
