"""Wait on a condition, not on the clock: poll until it holds or a deadline passes.

Example::

    out = wait_until(lambda: "ready" in log.read_text() and log.read_text(), 30, "the ready line")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    poll: float = 0.1,
    *,
    detail: Callable[[], str] | None = None,
) -> T:
    """Call ``condition`` until it returns something truthy and return that; it is asked once
    more at the deadline, so a slow machine only makes the wait longer, never the answer wrong.

    Args:
        condition: asked every ``poll`` seconds; may raise to end the wait (e.g. a process died).
        timeout: seconds before the test fails.
        what: what is awaited, for the failure message ("the parent run").
        poll: seconds between two calls.
        detail: called once on failure, its text added to the message (e.g. the page's text).

    Raises:
        pytest.fail.Exception: still falsy after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = f": {detail()}" if detail is not None else ""
            pytest.fail(f"{what} not seen within {timeout:g} s{extra}")
        time.sleep(poll)
