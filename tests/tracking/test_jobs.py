"""Tests for study.tracking.jobs: MLflow calls on one background thread, in order; a tracking
server that stops answering pauses them (one line), is probed until it answers (one line), and
the catch-up runs before the job that failed runs again; `close` waits for a server that is
back within its wait, and one still away after it drops what is queued with one line."""

from __future__ import annotations

import threading
import time

import pytest
import requests
from mlflow.exceptions import MlflowException

from study.tracking import jobs as jobs_module
from study.tracking.jobs import BackgroundJobs, patiently
from tests.waiting import wait_until


def unreachable() -> None:
    raise MlflowException("API request failed") from requests.exceptions.ConnectionError()


class Server:
    """A tracking server that answers while ``up`` is set; it counts the probes."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.up.set()
        self.probes = 0

    def answers(self) -> bool:
        self.probes += 1
        return self.up.is_set()

    def call(self, done: list[str], name: str) -> None:
        if not self.up.is_set():
            unreachable()
        done.append(name)


def test_jobs_pause_while_the_server_is_away_and_catch_up_when_it_is_back(
    capsys, monkeypatch
) -> None:
    monkeypatch.setattr(jobs_module, "FIRST_PROBE_S", 0.01)
    server, done = Server(), []
    jobs = BackgroundJobs(
        "http://127.0.0.1:1", catch_up=lambda: done.append("catch-up"), answers=server.answers
    )
    jobs.submit(lambda: server.call(done, "a"))
    jobs.flush()
    server.up.clear()
    jobs.submit(lambda: server.call(done, "b"))  # fails: the queue pauses
    jobs.submit(lambda: server.call(done, "c"))  # waits
    wait_until(lambda: server.probes >= 3, 30, "a few probes of the absent server")
    assert jobs.away and done == ["a"]
    server.up.set()
    jobs.close()

    assert done == ["a", "catch-up", "b", "c"]
    assert not jobs.away and not jobs.offline and jobs.outages == 1 and jobs.dropped == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert "http://127.0.0.1:1 stopped answering (ConnectionError)" in err[0]
    assert "logging pauses until it is back" in err[0]
    assert "http://127.0.0.1:1 answers again" in err[1] and "from the ledger" in err[1]


def test_a_catch_up_the_server_interrupts_runs_again(capsys, monkeypatch) -> None:
    monkeypatch.setattr(jobs_module, "FIRST_PROBE_S", 0.01)
    server, done, attempts = Server(), [], []

    def catch_up() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            server.up.clear()  # gone again in the middle of the catch-up
            threading.Timer(0.2, server.up.set).start()
            unreachable()
        done.append("catch-up")

    jobs = BackgroundJobs("http://127.0.0.1:1", catch_up=catch_up, answers=server.answers)
    server.up.clear()
    threading.Timer(0.2, server.up.set).start()
    jobs.submit(lambda: server.call(done, "a"))
    wait_until(lambda: done == ["catch-up", "a"], 30, "the catch-up, then the job")
    jobs.close()

    assert done == ["catch-up", "a"] and jobs.outages == 2
    assert len(capsys.readouterr().err.splitlines()) == 4


def test_a_server_still_away_at_close_drops_the_queue_with_one_line(capsys) -> None:
    server, done = Server(), []
    server.up.clear()
    jobs = BackgroundJobs("http://127.0.0.1:1", answers=server.answers)
    for name in "abc":
        jobs.submit(lambda name=name: server.call(done, name))
    jobs.close()

    assert done == [] and jobs.offline and jobs.dropped == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert "stopped answering" in err[0]
    assert "did not answer again before this run ended" in err[1] and "study resume" in err[1]


def test_close_waits_for_a_server_that_comes_back_within_its_wait(capsys, monkeypatch) -> None:
    monkeypatch.setattr(jobs_module, "FIRST_PROBE_S", 0.01)
    server, done = Server(), []
    server.up.clear()
    jobs = BackgroundJobs(
        "http://127.0.0.1:1", catch_up=lambda: done.append("catch-up"), answers=server.answers
    )
    jobs.submit(lambda: server.call(done, "end"))  # e.g. closing the parent run
    threading.Timer(0.3, server.up.set).start()  # back while the run ends
    jobs.close(wait=30)

    assert done == ["catch-up", "end"] and not jobs.offline
    assert "answers again" in capsys.readouterr().err


def test_a_starting_run_waits_for_the_server_and_calls_again(capsys, monkeypatch) -> None:
    monkeypatch.setattr(jobs_module, "FIRST_PROBE_S", 0.01)
    server, calls = Server(), []
    server.up.clear()
    threading.Timer(0.3, server.up.set).start()

    def call() -> str:
        calls.append(1)
        server.call([], "search")
        return "parent"

    assert patiently(call, "http://x", "http://x", answers=server.answers) == "parent"
    assert len(calls) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "stopped answering as this run started" in err[0], err
    assert "answers again" in err[1]


def test_a_starting_run_gives_up_after_its_window_and_passes_other_errors() -> None:
    with pytest.raises(MlflowException):
        patiently(unreachable, "http://x", "http://x", window=0.0, answers=lambda: False)
    with pytest.raises(ValueError):
        patiently(lambda: int("x"), "http://x", "http://x", answers=lambda: True)


def test_background_jobs_go_on_after_other_errors(capsys) -> None:
    jobs = BackgroundJobs("sqlite:///x.db")
    done: list[int] = []

    def broken() -> None:
        raise ValueError("bad value\nsecond line")

    for job in (broken, lambda: done.append(1), broken, lambda: done.append(2)):
        jobs.submit(job)
    jobs.close()

    assert done == [1, 2]
    assert not jobs.offline and jobs.outages == 0
    assert capsys.readouterr().err == (
        "study: warning: MLflow logging failed: ValueError: bad value\n"
    )


def test_jobs_linger_so_that_what_follows_runs_with_them_and_a_flush_does_not_wait() -> None:
    jobs = BackgroundJobs("sqlite:///x.db", linger=30.0)
    ran: list[tuple[str, float]] = []
    start = time.monotonic()
    jobs.submit(lambda: ran.append(("a", time.monotonic())))
    time.sleep(0.2)
    assert ran == []  # lingering: the job waits for others
    jobs.submit(lambda: ran.append(("b", time.monotonic())))
    jobs.flush()  # a flush hurries it: no 30 s wait
    assert [name for name, _ in ran] == ["a", "b"]
    assert time.monotonic() - start < 10
    jobs.close()


def test_a_keyed_job_runs_only_when_no_newer_one_of_its_key_is_queued() -> None:
    jobs = BackgroundJobs("sqlite:///x.db", linger=30.0)
    done: list[str] = []
    for name in ("state 1", "state 2", "state 3"):
        jobs.submit(lambda name=name: done.append(name), key="allocation.json")
        jobs.submit(lambda name=name: done.append(f"trial after {name}"))
    jobs.flush()
    assert done == ["trial after state 1", "trial after state 2", "state 3", "trial after state 3"]
    jobs.submit(lambda: done.append("state 4"), key="allocation.json")
    jobs.close()
    assert done[-1] == "state 4"
