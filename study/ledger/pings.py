"""Checking pooled database connections before use, only when they sat idle.

SQLAlchemy's ``pool_pre_ping`` checks every connection it hands out with a ``SELECT 1``, and on
PostgreSQL that is one more transaction for every storage call (it doubled the transactions of
a trial). `ping_when_idle` checks only a connection that sat unused for more than `IDLE_S`
seconds, the ones a server restart or an idle timeout may have dropped; one in use since is
known good, and should the server drop it anyway, the call fails on a transient fault and
`study.ledger.retry.RetryingStorage` runs it again on a new connection.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy

#: A pooled connection unused for longer than this is checked before use, in seconds.
IDLE_S = 10.0


def ping_when_idle(engine: sqlalchemy.Engine, idle: float = IDLE_S) -> None:
    """Check ``engine``'s pooled connections before use if idle for more than ``idle`` seconds
    (a dropped one is replaced: SQLAlchemy's recipe for pessimistic disconnect handling)."""

    def checkin(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since <= idle:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise sqlalchemy.exc.DisconnectionError(str(exc)) from exc

    sqlalchemy.event.listen(engine, "checkin", checkin)
    sqlalchemy.event.listen(engine, "checkout", checkout)
