"""Transient storage faults retried: a database restarting, a dropped connection, a failover.

`RetryingStorage` wraps an Optuna storage and retries every call that fails on a transient
fault (`is_transient`: the connection refused, reset or lost, the server shutting down or
starting, a serialization failure or deadlock, a pool timeout; and the wrapped storage's own,
`OwnFaults`, e.g. a storage proxy unavailable) with jittered exponential backoff (0.5 s
doubling to 10 s, each wait drawn between half and all of it) for up to ``window`` seconds. The first fault of an outage prints one warning line and the
first call begun after it that succeeds one line saying the storage is back (a call that was
under way when it began says nothing of the storage now); calls from several
threads (the engine and the heartbeat thread) share one outage. Beyond the window the call
raises `StorageUnavailable` (exit status 75, "try again later"): the storage's records are as
they were before the outage, so ``study resume`` continues.

Retried writes stay correct when the first attempt's commit did land. Creating a study, creating
a trial and taking a waiting trial carry a token written in the same transaction
(`study.ledger.tokens`), and a retry first asks whether it is there: a study this call created is
returned, one another process created meanwhile is `DuplicatedStudyError` (exactly one of
processes creating a name at once wins); a trial this call created is returned, not made twice;
a waiting trial this call took is True, one another process took is False. Deleting a study
that is gone on the retry is done. Setting a parameter the trial now holds with the same value
is done, finishing a trial that is now finished in the same state (and values) is done (one
call, or a group of writes in one transaction, `retried`, `study.ledger.batch`). Every other
write sets a value (a retry writes the same value again). The tokens are hidden from every read
through this wrapper, so Optuna's storage contract holds (`tests/ledger/test_storage_contract.py`
runs Optuna's own storage and heartbeat suites through it, with faults injected on every write).
The wrapper is an Optuna heartbeat storage when the wrapped one is (its heartbeats retried too),
and pickles (the outage's lock is made anew).

The backoff is written here, not taken from tenacity (a test dependency, `tests/waiting.py`):
the waits of every thread share one outage (one warning line, one "back" line, one window from
its first fault, and the heartbeat grace's `back_at`), a retry first asks the storage whether
the lost write landed (`study.ledger.tokens`) before it writes again, and the window's end raises
`StorageUnavailable` naming the storage; tenacity's per-call ``Retrying`` keeps none of that
state across threads and calls, so it would need all of it around it.

The outage also extends heartbeats' grace: `back_at` is when this process last saw the storage
come back, and a heartbeat missed during the outage is not taken for a dead owner until one
grace after that (`study.ledger.liveness`), since no owner could stamp while it was away.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Container, Sequence
from typing import Any

from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

from study.adapters.optuna_internals import RDB_LOGGER, BaseHeartbeat, FrozenStudy
from study.errors import StorageUnavailable
from study.ledger import tokens
from study.ledger.batch import rdb_of
from study.ledger.tokens import Done, landed_as


class _QuietFallback(logging.Filter):
    """Drops Optuna's multi-line warning about a failed bulk read it redoes another way
    ("Caught an error from sqlalchemy ... Falling back to a slower alternative"): during an
    outage the retry's one line says what happens."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Caught an error from sqlalchemy" not in record.getMessage()


logging.getLogger(RDB_LOGGER).addFilter(_QuietFallback())

#: The retry window when none is given (by the command line, the study file's
#: ``storage_retry``), in seconds.
DEFAULT_WINDOW_S = 300.0
#: The first wait and the longest one between attempts, in seconds.
FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 10.0
#: Names of exception classes that mean the storage is away for now (matched on the class and
#: its bases along the exception's cause chain, so no driver needs to be importable here).
TRANSIENT = frozenset(
    {
        "OperationalError",  # DB-API: the server went away, refused, restarted, deadlock
        "InterfaceError",  # DB-API: the connection is closed
        "DisconnectionError",  # SQLAlchemy: the pool found a dead connection
        "TimeoutError",  # SQLAlchemy's pool, and the socket's
        "ConnectionError",  # ConnectionRefusedError, ConnectionResetError, BrokenPipeError
        "SerializationFailure",
        "DeadlockDetected",
        "AdminShutdown",
    }
)
#: The system attribute of a trial created from a template that names the claim it made (a
#: random token, `study.ledger.claims`).
CLAIM_TOKEN = "study:claim"
#: A storage's own transient faults beside the drivers' (`RetryingStorage`'s ``faults``, e.g.
#: a gRPC client's): ``faults(exc, limit)`` is ``exc`` in one line (its details cut at ``limit``
#: characters) when it is one, else None.
OwnFaults = Callable[[BaseException, int], "str | None"]


def no_own_faults(exc: BaseException, limit: int) -> str | None:
    """The `OwnFaults` of a storage whose transient faults are all the drivers'."""
    return None


def is_transient(exc: BaseException, own: OwnFaults = no_own_faults) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a transient fault."""
    return transient_cause(exc, own) is not None


def transient_cause(exc: BaseException, own: OwnFaults = no_own_faults) -> BaseException | None:
    """The transient fault behind ``exc`` (itself, or one along its cause chain), or None:
    what the messages name, since Optuna's wrapper says "invalid data in the commit" whatever
    went wrong. ``own``: the storage's own faults besides."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & TRANSIENT or getattr(current, "connection_invalidated", False):
            return current
        if own(current, 0) is not None:
            return current
        current = current.__cause__ or current.__context__
    return None


def fault_text(exc: BaseException, limit: int = 200, own: OwnFaults = no_own_faults) -> str:
    """A fault in one short line: ``OperationalError: connection ... refused`` (SQLAlchemy's
    link to its background page left out), or as ``own`` words it."""
    text = own(exc, limit)
    if text is not None:
        return text
    first = " ".join(str(exc).split()).partition(" (Background on this error")[0]
    return f"{type(exc).__name__}: {first[:limit]}"


class Outage:
    """The state of one storage's outage, shared by the threads that call it: ``since`` (on
    ``monotonic``) while it lasts, ``back_at`` (on ``now``, the ledger's clock) once over."""

    def __init__(
        self,
        where: str,
        window: float,
        say: Callable[[str], None],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.where, self.window, self.say = where, window, say
        self.monotonic, self.now = monotonic, now
        self.since: float | None = None
        self.back_at: float = 0.0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def failed(self, fault: str) -> float:
        """Note a transient fault (``fault``: it in one line, `fault_text`); return when the
        outage began (monotonic seconds)."""
        with self._lock:
            if self.since is None:
                self.since = self.monotonic()
                self.say(
                    f"study: warning: the storage {self.where} is not answering "
                    f"({fault}); retrying for up to {self.window:.0f} s"
                )
            return self.since

    def answered(self, begun: float) -> None:
        """Note a call begun at ``begun`` (monotonic seconds) that answered: the outage is over,
        unless the call began before it did (its answer says nothing about the storage now: a
        restart's first fault, then a call that was under way, then the next fault would
        otherwise be two outages)."""
        with self._lock:
            if self.since is not None and begun >= self.since:
                seconds = self.monotonic() - self.since
                self.since = None
                self.back_at = self.now()
                self.say(f"study: the storage {self.where} answers again (after {seconds:.0f} s)")


#: A check run before each retry: the call's result if its first attempt landed, else None.
Check = Callable[[], "Done | None"]


class RetryingStorage(BaseStorage, BaseHeartbeat):
    """An Optuna storage whose calls are retried through transient faults (see the module
    docstring); ``faults``: the wrapped storage's own transient faults (`OwnFaults`).
    ``sleep``, ``say``, ``monotonic`` and ``now`` are for tests (``now`` is the clock
    heartbeats are judged by)."""

    def __init__(
        self,
        inner: BaseStorage,
        where: str,
        window: float = DEFAULT_WINDOW_S,
        *,
        faults: OwnFaults = no_own_faults,
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.faults = faults
        self.outage = Outage(where, window, say or _stderr, monotonic=monotonic, now=now)
        self._sleep = sleep
        self._random = random.Random()

    @property
    def back_at(self) -> float:
        """When this process last saw the storage come back (Unix time; 0 if never away)."""
        return self.outage.back_at

    def __getattr__(self, name: str) -> Any:  # anything else the wrapped storage has
        if name == "inner":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._retry(name, lambda: getattr(self.inner, name)(*args, **kwargs), args, kwargs)

    def retried(self, name: str, call: Callable[[], Any], *args: Any) -> Any:
        """``call()`` (what the ledger does to the wrapped storage as one unit, e.g. a group of
        writes in one transaction: `study.ledger.batch`), retried like every storage call;
        ``name`` and ``args`` say what it does, for a retry whose first commit landed."""
        return self._retry(name, call, args, {})

    # -- the writes that carry a token (`study.ledger.tokens`) ------------------------------
    def create_new_study(
        self, directions: Sequence[StudyDirection], study_name: str | None = None
    ) -> int:
        """`BaseStorage.create_new_study`, retried; a retry knows whether the first attempt
        created the study (then its id) or another process did (`DuplicatedStudyError`)."""
        name = tokens.unique_study_name() if study_name is None else study_name
        token = tokens.new_token()
        marked = [False]

        def call() -> int:
            marked[0] = True  # until the storage says it has no such call: it may land
            made = _once(self.inner, "create_study", list(directions), name, token)
            marked[0] = made is not _NO_ONCE
            return made if marked[0] else self.inner.create_new_study(directions, name)

        def check() -> Done | None:
            # unmarked (a storage without the call): a study of this name is taken for this one's
            mine = None if study_name is None or not marked[0] else token
            found = tokens.study_created(self.inner, name, mine)
            return None if found is None else Done(found)

        return self._retry("create_new_study", call, (directions, name), {}, check)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        """`BaseStorage.create_new_trial`, retried; a retry finds the trial the first attempt
        created instead of creating a second."""
        token = tokens.new_token()
        template = tokens.with_token(template_trial, token)

        def check() -> Done | None:
            found = tokens.trial_created(self.inner, study_id, token)
            return None if found is None else Done(found)

        call = lambda: self.inner.create_new_trial(study_id, template)  # noqa: E731
        return self._retry("create_new_trial", call, (study_id, template), {}, check)

    def set_trial_state_values(
        self, trial_id: int, state: OptunaState, values: Sequence[float] | None = None
    ) -> bool:
        """`BaseStorage.set_trial_state_values`, retried; a retry knows whether the first
        attempt took the waiting trial (True) or finished the trial (True), or another process
        did (False; `UpdateFinishedTrialError`)."""
        args = (trial_id, state, values)
        if not (state is OptunaState.RUNNING or state.is_finished()):
            return self._call("set_trial_state_values", *args)
        token = tokens.new_token()
        marked = [False]

        def call() -> bool:
            marked[0] = True  # until the storage says it has no such call: it may land
            changed = _once(self.inner, "set_state", trial_id, state, values, token)
            marked[0] = changed is not _NO_ONCE
            return changed if marked[0] else self.inner.set_trial_state_values(*args)

        def check() -> Done | None:
            mine = marked[0] and tokens.state_set(self.inner, trial_id, state, token)
            return Done(True) if mine else None

        def landed(exc: Exception) -> Done | None:  # unmarked: the state alone tells
            return (
                None
                if marked[0]
                else landed_as(self.inner, "set_trial_state_values", args, {}, exc, False)
            )

        return self._retry("set_trial_state_values", call, args, {}, check, landed)

    # -- reads: the tokens hidden ------------------------------------------------------------
    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return tokens.hide_attrs(self._call("get_study_system_attrs", study_id))

    def get_all_studies(self) -> list[FrozenStudy]:
        return [tokens.hide_study(s) for s in self._call("get_all_studies")]

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return tokens.hide_trial(self._call("get_trial", trial_id))

    def get_trial_system_attrs(self, trial_id: int) -> dict[str, Any]:
        return self.get_trial(trial_id).system_attrs

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        return tokens.hide_trial(self._call("get_best_trial", study_id))

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[OptunaState] | None = None,
    ) -> list[FrozenTrial]:
        found = self._call("get_all_trials", study_id, deepcopy=deepcopy, states=states)
        return [tokens.hide_trial(t) for t in found]

    # -- Optuna's heartbeat, when the wrapped storage keeps one ------------------------------
    def get_heartbeat_interval(self) -> int | None:
        inner = self.inner
        return inner.get_heartbeat_interval() if isinstance(inner, BaseHeartbeat) else None

    def get_heartbeat_stale_trial_callback(self) -> Callable[..., None] | None:
        inner = self.inner
        if not isinstance(inner, BaseHeartbeat):
            return None
        return inner.get_heartbeat_stale_trial_callback()

    def record_heartbeat(self, trial_id: int) -> None:
        self._call("record_heartbeat", trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self._call("_get_stale_trial_ids", study_id)

    # -- the retry itself --------------------------------------------------------------------
    def _retry(
        self,
        name: str,
        call: Callable[[], Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        check: Check | None = None,
        landed: Callable[[Exception], Done | None] | None = None,
    ) -> Any:
        """``call()`` until it answers (see the module docstring); before each retry ``check``
        (the result if the first attempt landed), and on a retry refused ``landed`` (default
        `study.ledger.tokens.landed_as`: the result if the refusal says the first landed)."""
        refused = landed or (
            lambda exc: landed_as(
                self.inner, name, args, kwargs, exc, is_transient(exc, self.faults)
            )
        )
        attempt = 0
        retried = False
        while True:
            begun = self.outage.monotonic()
            try:
                if retried and check is not None and (done := check()) is not None:
                    self.outage.answered(begun)
                    return done.value
                result = call()
            except Exception as exc:
                if retried and (done := refused(exc)) is not None:
                    self.outage.answered(begun)
                    return done.value
                cause = transient_cause(exc, self.faults)
                if cause is None:
                    raise
                since = self.outage.failed(fault_text(cause, 160, self.faults))
                waited = self.outage.monotonic() - since
                # (a millisecond short counts as out: the last wait ends at the window's end, and
                # rounding could leave a sliver no sleep can cross)
                if waited >= self.outage.window - 1e-3:
                    fault = fault_text(cause, own=self.faults)
                    raise StorageUnavailable(self.outage.where, waited, fault) from None
                wait = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2.0 ** min(attempt, 32))
                wait = min(wait * (0.5 + 0.5 * self._random.random()), self.outage.window - waited)
                self._sleep(max(wait, 0.0))
                attempt += 1
                retried = True
                continue
            self.outage.answered(begun)
            return result


#: What `_once` returns where the wrapped storage has no way to write a token.
_NO_ONCE = object()


def _once(inner: BaseStorage, op: str, *args: Any) -> Any:
    """Run the token write ``op`` of `study.ledger.tokens` (``create_study``,
    ``set_state``) on ``inner``: in one transaction on an RDB storage, as one call to a
    storage that offers it (its ``once``, e.g. a storage proxy's); `_NO_ONCE` where neither
    exists."""
    rdb = rdb_of(inner)
    if rdb is not None:
        return getattr(tokens, op)(rdb, *args)
    once = getattr(inner, "once", None)
    return _NO_ONCE if once is None else once(op, *args, missing=_NO_ONCE)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _delegate(name: str) -> Callable[..., Any]:
    def call(self: RetryingStorage, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"`BaseStorage.{name}`, retried through transient faults."
    return call


for _name in [n for n in dir(BaseStorage) if not n.startswith("_")]:
    if _name not in RetryingStorage.__dict__:
        setattr(RetryingStorage, _name, _delegate(_name))
RetryingStorage.__abstractmethods__ = frozenset()
