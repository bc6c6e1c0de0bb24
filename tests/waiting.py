"""Wait on a condition, not on the clock: poll until it holds or a deadline passes.

The polling is tenacity's (`tenacity.Retrying`: retry while the result is falsy, stop once the
deadline has passed, a fixed pause between calls); this module only says what a test needs
on top: the truthy value back, and on timeout a test failure that names what was awaited.

Example::

    out = wait_until(lambda: "ready" in log.read_text() and log.read_text(), 30, "the ready line")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

import pytest
from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

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
        condition: asked every ``poll`` seconds; may raise to end the wait (e.g. a process died):
            the exception is not retried but raised as it is.
        timeout: seconds before the test fails.
        what: what is awaited, for the failure message ("the parent run").
        poll: seconds between two calls.
        detail: called once on failure, its text added to the message (e.g. the page's text).

    Raises:
        pytest.fail.Exception: still falsy after ``timeout`` seconds.
    """

    def fail(_: RetryCallState) -> NoReturn:
        extra = f": {detail()}" if detail is not None else ""
        pytest.fail(f"{what} not seen within {timeout:g} s{extra}")

    retrying = Retrying(
        retry=retry_if_result(lambda value: not value),  # an exception is not retried
        stop=stop_after_delay(timeout),  # checked after each call: the last is at the deadline
        wait=wait_fixed(poll),
        retry_error_callback=fail,
    )
    return retrying(condition)
