"""tests/waiting.py: the truthy value back, an exception raised as it is, one more call at the
deadline, and a failure that names what was awaited."""

from __future__ import annotations

import time

import pytest

from tests.waiting import wait_until


def test_returns_the_first_truthy_value() -> None:
    answers = iter([None, "", 0, "ready"])
    assert wait_until(lambda: next(answers), 5, "the answer", poll=0.001) == "ready"


def test_asks_once_more_at_the_deadline() -> None:
    calls = []

    def condition() -> bool:
        calls.append(time.monotonic())
        return len(calls) == 2  # true only when asked again, after the deadline

    assert wait_until(condition, 0.05, "the second call", poll=0.1) is True
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.1


@pytest.mark.parametrize("error", [ProcessLookupError, pytest.fail.Exception])
def test_an_exception_ends_the_wait_as_it_is(error: type[BaseException]) -> None:
    calls = []

    def condition() -> bool:
        calls.append(1)
        raise error("the process died")

    with pytest.raises(error, match="the process died"):
        wait_until(condition, 5, "a dead process", poll=0.001)
    assert calls == [1]


def test_a_timeout_fails_the_test_naming_what_and_the_detail() -> None:
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"the flag not seen within 0.2 s: page: x"):
        wait_until(lambda: False, 0.2, "the flag", poll=0.05, detail=lambda: "page: x")
    assert 0.2 <= time.monotonic() - started < 2
