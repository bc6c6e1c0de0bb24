"""A waiting worker's looks at the ledger (`study.runner.fleet.poll_delays`): 2 s, doubling up to
a quarter of the heartbeat grace, never above the heartbeat interval at first."""

from __future__ import annotations

import itertools

from study.config.study import Heartbeat
from study.runner.fleet import poll_delays


def delays(interval: float, grace: float, n: int = 6) -> list[float]:
    return list(itertools.islice(poll_delays(Heartbeat(interval=interval, grace=grace)), n))


def test_the_default_heartbeat_polls_2_4_8_then_a_quarter_grace() -> None:
    assert delays(10.0, 60.0) == [2.0, 4.0, 8.0, 15.0, 15.0, 15.0]


def test_a_short_heartbeat_polls_at_its_interval() -> None:
    assert delays(1.0, 3.0) == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert delays(0.5, 8.0) == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]
