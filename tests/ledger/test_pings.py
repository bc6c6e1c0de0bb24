"""`study.ledger.pings`: a pooled connection is checked before use only after sitting idle, and
one the server dropped meanwhile is replaced without the call failing (a real PostgreSQL)."""

from __future__ import annotations

import sqlalchemy

from study.ledger.pings import ping_when_idle
from tests.services import PostgresServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def engine_on(url: str, monkeypatch, clock: Clock) -> sqlalchemy.Engine:
    monkeypatch.setattr("study.ledger.pings.time.monotonic", clock)
    engine = sqlalchemy.create_engine(url, pool_size=1, pool_use_lifo=True)
    ping_when_idle(engine, idle=10.0)
    return engine


def backend_pid(engine: sqlalchemy.Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar_one())


def test_a_busy_connection_is_not_pinged(postgres_url: str, monkeypatch) -> None:
    clock = Clock()
    engine = engine_on(postgres_url, monkeypatch, clock)
    pings = []
    monkeypatch.setattr(engine.dialect, "do_ping", lambda c: pings.append(c) or True)
    first = backend_pid(engine)
    clock.now += 5.0
    assert backend_pid(engine) == first and pings == []
    clock.now += 10.5
    assert backend_pid(engine) == first and len(pings) == 1


def test_an_idle_connection_the_server_dropped_is_replaced(
    postgres: PostgresServer, postgres_url: str, monkeypatch
) -> None:
    clock = Clock()
    engine = engine_on(postgres_url, monkeypatch, clock)
    first = backend_pid(engine)
    with postgres._super() as admin:  # type: ignore[attr-defined]
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    clock.now += 11.0  # idle past the threshold: checked, found dead, replaced
    assert backend_pid(engine) != first
