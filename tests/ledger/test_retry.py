"""`RetryingStorage`: transient faults waited through, others raised, the window kept."""

from __future__ import annotations

import threading

import optuna
import pytest
import sqlalchemy.exc
from optuna.storages import InMemoryStorage
from optuna.study import StudyDirection
from optuna.trial import TrialState as OptunaState

from study.errors import StorageUnavailable
from study.ledger.retry import Outage, RetryingStorage, is_transient


class FakeTime:
    """A monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def dropped() -> Exception:
    """What SQLAlchemy raises when the server went away, wrapped as Optuna wraps commits."""
    cause = sqlalchemy.exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))
    try:
        raise optuna.exceptions.StorageInternalError("invalid data in the commit") from cause
    except optuna.exceptions.StorageInternalError as exc:
        return exc


class Flaky(InMemoryStorage):
    """An in-memory storage whose next ``fail`` calls of ``method`` raise ``error()``; with
    ``land``, the failing call's write happens first (its commit landed, the answer was lost)."""

    def __init__(self, method: str, fail: int, error=dropped, land: bool = False) -> None:
        super().__init__()
        self.method, self.fail, self.error, self.land = method, fail, error, land
        self.calls = 0

    def __getattribute__(self, name: str):
        attribute = super().__getattribute__(name)
        if name != super().__getattribute__("method") or not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            self.calls += 1
            if self.fail > 0:
                self.fail -= 1
                if self.land:
                    attribute(*args, **kwargs)
                raise self.error()
            return attribute(*args, **kwargs)

        return call


def retrying(inner, window: float = 60.0) -> tuple[RetryingStorage, FakeTime, list[str]]:
    clock, said = FakeTime(), []
    storage = RetryingStorage(
        inner, "postgresql://study:***@db/ledger", window,
        sleep=clock.sleep, say=said.append, monotonic=clock.monotonic, now=lambda: clock.now,
    )  # fmt: skip
    return storage, clock, said


def test_a_dropped_connection_is_waited_through_with_growing_jittered_waits() -> None:
    storage, clock, said = retrying(Flaky("create_new_study", fail=5))
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    assert storage.get_study_id_from_name("s") == study_id
    assert len(clock.slept) == 5
    assert all(0.25 <= w <= 0.5 for w in clock.slept[:1])
    assert clock.slept[4] > clock.slept[0] and max(clock.slept) <= 10.0
    assert len(said) == 2
    assert said[0].startswith("study: warning: the storage postgresql://study:***@db/ledger is")
    assert "retrying for up to 60 s" in said[0]
    assert "(OperationalError: (builtins.Exception) server closed the connection" in said[0]
    assert said[1].startswith("study: the storage postgresql://study:***@db/ledger answers again")
    assert storage.back_at == clock.now


def test_an_error_that_is_not_transient_is_raised_at_once() -> None:
    storage, clock, said = retrying(InMemoryStorage())
    with pytest.raises(KeyError):
        storage.get_study_id_from_name("missing")
    integrity = sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
    storage, clock, said = retrying(Flaky("create_new_study", 1, error=lambda: integrity))
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        storage.create_new_study([StudyDirection.MINIMIZE], "s")
    assert clock.slept == [] and said == []


def test_past_the_window_the_storage_is_unavailable_and_later_calls_fail_fast() -> None:
    storage, clock, said = retrying(Flaky("get_all_studies", fail=10_000), window=30.0)
    with pytest.raises(StorageUnavailable) as lost:
        storage.get_all_studies()
    assert lost.value.where == "postgresql://study:***@db/ledger"
    assert 30.0 <= lost.value.seconds < 31.0 and sum(clock.slept) == pytest.approx(30.0)
    assert "did not answer for 30 s (OperationalError: " in str(lost.value)  # the cause, named
    assert "StorageInternalError" not in str(lost.value) and "(storage_retry)" in str(lost.value)
    before = len(clock.slept)
    with pytest.raises(StorageUnavailable):
        storage.get_all_studies()
    assert len(clock.slept) == before  # the same outage: no second wait
    assert len(said) == 1


def test_a_write_whose_commit_landed_is_not_done_twice() -> None:
    storage, _, _ = retrying(Flaky("create_new_study", fail=1, land=True))
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], study_name="s")
    assert [s.study_name for s in storage.get_all_studies()] == ["s"]
    assert storage.get_study_id_from_name("s") == study_id
    inner = Flaky("set_trial_state_values", fail=1, land=True)
    storage, _, _ = retrying(inner)
    trial = storage.create_new_trial(study_id=storage.create_new_study([StudyDirection.MINIMIZE]))
    assert storage.set_trial_state_values(trial, OptunaState.COMPLETE, [3.0]) is True
    assert storage.get_trial(trial).state is OptunaState.COMPLETE and inner.calls == 2


def test_a_parameter_whose_commit_landed_is_not_set_twice() -> None:
    class Unique(Flaky):  # a second row for the same parameter is refused, as on a database
        def set_trial_param(self, trial_id, name, value, dist):
            if name in InMemoryStorage.get_trial(self, trial_id).params:
                raise sqlalchemy.exc.IntegrityError("INSERT", {}, Exception("duplicate key"))
            return super().set_trial_param(trial_id, name, value, dist)

    inner = Unique("set_trial_param", fail=1, land=True)
    storage, _, said = retrying(inner)
    trial = storage.create_new_trial(study_id=storage.create_new_study([StudyDirection.MINIMIZE]))
    dist = optuna.distributions.FloatDistribution(1e-3, 1.0, log=True)
    storage.set_trial_param(trial, "lr", 0.05, dist)
    assert storage.get_trial(trial).params == {"lr": 0.05} and inner.calls == 2 and len(said) == 2
    with pytest.raises(sqlalchemy.exc.IntegrityError):  # another value is no retry: refused
        storage.set_trial_param(trial, "lr", 0.07, dist)


def test_threads_share_one_outage_and_one_warning() -> None:
    storage, _, said = retrying(Flaky("get_all_studies", fail=6))
    threads = [threading.Thread(target=storage.get_all_studies) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([line for line in said if "warning" in line]) == 1


def test_a_call_under_way_when_the_outage_began_does_not_end_it() -> None:
    """A restart: one call's connection drops, another call that was under way still answers,
    the next one finds the server shutting down. One outage, one warning, one line when back."""
    clock, said = FakeTime(), []
    outage = Outage("db", 60.0, said.append, monotonic=clock.monotonic, now=lambda: clock.now)
    under_way = clock.monotonic()
    clock.sleep(0.1)
    outage.failed("OperationalError: server closed the connection unexpectedly")
    clock.sleep(0.1)
    outage.answered(under_way)
    assert outage.since is not None and len(said) == 1
    outage.failed("OperationalError: the database system is shutting down")
    clock.sleep(7.0)
    outage.answered(clock.monotonic() - 0.5)  # begun after the outage did
    assert outage.since is None and outage.back_at == clock.now
    assert len(said) == 2 and said[1] == "study: the storage db answers again (after 7 s)"


def test_what_counts_as_transient() -> None:
    assert is_transient(dropped())
    assert is_transient(ConnectionRefusedError(111, "refused"))
    invalidated = sqlalchemy.exc.DBAPIError("SELECT 1", {}, Exception("gone"))
    invalidated.connection_invalidated = True
    assert is_transient(invalidated)
    assert not is_transient(ValueError("bad"))
    assert not is_transient(KeyError("no study"))


class Busy(Exception):
    """A storage's own transient fault (e.g. a client's "come back later")."""


def busy_faults(exc: BaseException, limit: int) -> str | None:
    """The `OwnFaults` of a storage that raises `Busy`."""
    return f"busy: {str(exc)[:limit]}" if isinstance(exc, Busy) else None


def test_a_storage_s_own_faults_are_transient_too_and_worded_its_way() -> None:
    assert not is_transient(Busy("later")) and is_transient(Busy("later"), busy_faults)
    try:
        raise optuna.exceptions.StorageInternalError("wrapped") from Busy("later")
    except optuna.exceptions.StorageInternalError as exc:
        assert is_transient(exc, busy_faults)  # along the cause chain, as the drivers' faults
    clock, said = FakeTime(), []
    storage = RetryingStorage(
        Flaky("get_all_studies", fail=3, error=lambda: Busy("the queue is full")),
        "grpc://proxy:1", 60.0, faults=busy_faults,
        sleep=clock.sleep, say=said.append, monotonic=clock.monotonic,
    )  # fmt: skip
    assert storage.get_all_studies() == [] and len(clock.slept) == 3
    assert "(busy: the queue is full); retrying for up to 60 s" in said[0]
    storage.inner.fail = 10_000
    with pytest.raises(StorageUnavailable, match=r"for 6\d s \(busy: the queue is full\)"):
        storage.get_all_studies()


def test_unwrapped_attributes_reach_the_storage_inside() -> None:
    inner = InMemoryStorage()
    storage, _, _ = retrying(inner)
    assert storage.inner is inner
    storage.create_new_study([StudyDirection.MINIMIZE], "s")
    study = optuna.load_study(study_name="s", storage=storage)
    study.enqueue_trial({"x": 1.0})
    assert study.trials[0].state is OptunaState.WAITING


def test_optunas_fallback_warning_is_left_to_the_retry_line(caplog) -> None:
    import logging

    logger = logging.getLogger("optuna.storages._rdb.storage")
    with caplog.at_level(logging.WARNING, logger="optuna.storages._rdb.storage"):
        logger.warning("Caught an error from sqlalchemy: gone. Falling back to a slower one.")
        logger.warning("something else")
    assert [r.getMessage() for r in caplog.records] == ["something else"]


def test_an_outage_ends_at_its_window_whatever_the_clock_s_rounding() -> None:
    """A clock that lands each wait a sliver short, and cannot move by less than a microsecond
    (a float's rounding at a large reading), still ends the outage at its window: no endless
    retries of nothing, no overflow of the backoff."""

    class Coarse(FakeTime):
        def sleep(self, seconds: float) -> None:
            self.slept.append(seconds)
            self.now += seconds - 1e-7 if seconds > 1e-6 else 0.0

    clock = Coarse()
    storage = RetryingStorage(
        Flaky("get_all_studies", fail=10**9, error=lambda: Busy("the queue is full")),
        "grpc://proxy:1", 60.0, faults=busy_faults,
        sleep=clock.sleep, say=lambda _: None, monotonic=clock.monotonic,
    )  # fmt: skip
    with pytest.raises(StorageUnavailable):
        storage.get_all_studies()
    assert len(clock.slept) < 100
