"""Transient storage faults retried: a database restarting, a dropped connection, a failover.

`RetryingStorage` wraps an Optuna storage and retries every call that fails on a transient
fault (`is_transient`: the connection refused, reset or lost, the server shutting down or
starting, a serialization failure or deadlock, a pool timeout, a gRPC proxy unavailable) with
jittered exponential backoff (0.5 s doubling to 10 s, each wait drawn between half and all of
it) for up to ``window`` seconds. The first fault of an outage prints one warning line and the
first call that succeeds after it one line saying the storage is back; calls from several
threads (the engine and the heartbeat thread) share one outage. Beyond the window the call
raises `StorageUnavailable` (exit status 75, "try again later"): the storage's records are as
they were before the outage, so ``study resume`` continues.

Retried writes stay correct when the first attempt's commit did land: creating a study that
now exists returns it, setting a parameter the trial now holds with the same value is done,
finishing a trial that is now finished with the same state is done (one
call, or a group of writes in one transaction, `retried`, `study.ledger.batch`), and creating a
trial from a template with a `CLAIM_TOKEN` first looks for the trial the first attempt made.
Every other write sets a value (a retry writes the same value again). A trial created without
a token by a commit whose answer was lost is an empty claim that liveness recovery closes as
interrupted. Optuna's database storage also retries a trial's creation itself (up to five
times, inside `create_new_trial`, before this wrapper sees a fault), so a creation can land
twice from one template: `study.ledger.claims.Claims.claim` closes such a twin as discarded.

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
from collections.abc import Callable
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState as OptunaState

from study.errors import StorageUnavailable
from study.ledger.batch import WRITE_TRIAL, closed_as


class _QuietFallback(logging.Filter):
    """Drops Optuna's multi-line warning about a failed bulk read it redoes another way
    ("Caught an error from sqlalchemy ... Falling back to a slower alternative"): during an
    outage the retry's one line says what happens."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Caught an error from sqlalchemy" not in record.getMessage()


logging.getLogger("optuna.storages._rdb.storage").addFilter(_QuietFallback())

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
#: random token), so that a retried creation whose first commit landed finds it (`_created`).
CLAIM_TOKEN = "study:claim"
#: gRPC status codes that mean the proxy (or the database behind it) is away for now.
TRANSIENT_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "RESOURCE_EXHAUSTED"})


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) is a transient fault."""
    return transient_cause(exc) is not None


def transient_cause(exc: BaseException) -> BaseException | None:
    """The transient fault behind ``exc`` (itself, or one along its cause chain), or None:
    what the messages name, since Optuna's wrapper says "invalid data in the commit" whatever
    went wrong."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        names = {cls.__name__ for cls in type(current).__mro__}
        if names & TRANSIENT or getattr(current, "connection_invalidated", False):
            return current
        if "RpcError" in names and _grpc_code(current) in TRANSIENT_GRPC:
            return current
        current = current.__cause__ or current.__context__
    return None


def fault_text(exc: BaseException, limit: int = 200) -> str:
    """A fault in one short line: ``OperationalError: connection ... refused`` (SQLAlchemy's
    link to its background page left out), ``gRPC UNAVAILABLE: failed to connect ...``."""
    if "RpcError" in {cls.__name__ for cls in type(exc).__mro__} and _grpc_code(exc):
        try:
            details = str(exc.details())  # type: ignore[attr-defined]
        except Exception:
            details = ""
        return f"gRPC {_grpc_code(exc)}: {' '.join(details.split())[:limit]}"
    first = " ".join(str(exc).split()).partition(" (Background on this error")[0]
    return f"{type(exc).__name__}: {first[:limit]}"


def _grpc_code(exc: BaseException) -> str:
    """The name of a gRPC error's status code ("" when it has none that can be read)."""
    try:
        return str(getattr(exc.code(), "name", ""))  # type: ignore[attr-defined]
    except Exception:
        return ""


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

    def failed(self, exc: BaseException) -> float:
        """Note a transient fault; return when the outage began (monotonic seconds)."""
        with self._lock:
            if self.since is None:
                self.since = self.monotonic()
                self.say(
                    f"study: warning: the storage {self.where} is not answering "
                    f"({fault_text(exc, 160)}); retrying for up to {self.window:.0f} s"
                )
            return self.since

    def answered(self) -> None:
        with self._lock:
            if self.since is not None:
                seconds = self.monotonic() - self.since
                self.since = None
                self.back_at = self.now()
                self.say(f"study: the storage {self.where} answers again (after {seconds:.0f} s)")


class RetryingStorage(BaseStorage):
    """An Optuna storage whose calls are retried through transient faults (see the module
    docstring). ``sleep``, ``say``, ``monotonic`` and ``now`` are for tests (``now`` is the
    clock heartbeats are judged by)."""

    def __init__(
        self,
        inner: BaseStorage,
        where: str,
        window: float = DEFAULT_WINDOW_S,
        *,
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
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

    def _retry(
        self, name: str, call: Callable[[], Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        attempt = 0
        retried = False
        while True:
            try:
                if retried and (done := _created(self.inner, name, args, kwargs)) is not None:
                    self.outage.answered()
                    return done.value
                result = call()
            except Exception as exc:
                if retried and (done := _landed(self.inner, name, args, kwargs, exc)) is not None:
                    self.outage.answered()
                    return done.value
                cause = transient_cause(exc)
                if cause is None:
                    raise
                since = self.outage.failed(cause)
                waited = self.outage.monotonic() - since
                if waited >= self.outage.window:
                    raise StorageUnavailable(self.outage.where, waited, fault_text(cause)) from None
                wait = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2**attempt)
                wait = min(wait * (0.5 + 0.5 * self._random.random()), self.outage.window - waited)
                self._sleep(max(wait, 0.0))
                attempt += 1
                retried = True
                continue
            self.outage.answered()
            return result


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value


def _landed(
    inner: BaseStorage, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception
) -> _Done | None:
    """The result of a write whose earlier attempt did land (its retry is refused for it), or
    None: a study created twice, a parameter set twice to the same value, a trial finished
    twice with the same state."""

    def arg(index: int, key: str) -> Any:
        return args[index] if len(args) > index else kwargs.get(key)

    if name == "create_new_study" and isinstance(exc, optuna.exceptions.DuplicatedStudyError):
        study_name = arg(1, "study_name")
        return _Done(inner.get_study_id_from_name(study_name)) if study_name else None
    if name == "set_trial_state_values" and isinstance(
        exc, optuna.exceptions.UpdateFinishedTrialError
    ):
        state = arg(1, "state")
        if isinstance(state, OptunaState) and inner.get_trial(arg(0, "trial_id")).state is state:
            return _Done(True)
    if name == "set_trial_param" and transient_cause(exc) is None:  # refused as a duplicate
        trial_id, param = arg(0, "trial_id"), arg(1, "param_name")
        dist = arg(3, "distribution")
        try:
            frozen = inner.get_trial(trial_id)
        except Exception:
            return None
        held = param in frozen.params and dist is not None
        if held and dist.to_internal_repr(frozen.params[param]) == arg(2, "param_value_internal"):
            return _Done(None)
        return None
    if name == WRITE_TRIAL and isinstance(exc, optuna.exceptions.UpdateFinishedTrialError):
        writes = arg(0, "writes")
        if writes is not None and closed_as(inner.get_trial(writes.trial_id), writes):
            return _Done(None)
    return None


def _created(
    inner: BaseStorage, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _Done | None:
    """Before a retry of ``create_new_trial`` from a template that carries a `CLAIM_TOKEN`:
    the trial an earlier attempt created (its commit landed, its answer was lost), or None.
    Without this the retry would leave a second trial claimed in this process's name, which
    no one would ever take for dead."""
    template = args[1] if len(args) > 1 else kwargs.get("template_trial")
    token = getattr(template, "system_attrs", {}).get(CLAIM_TOKEN) if template else None
    if name != "create_new_trial" or token is None:
        return None
    study_id = args[0] if args else kwargs["study_id"]
    for trial in inner.get_all_trials(study_id, deepcopy=False, states=(OptunaState.RUNNING,)):
        if trial.system_attrs.get(CLAIM_TOKEN) == token:
            return _Done(trial._trial_id)
    return None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _delegate(name: str) -> Callable[..., Any]:
    def call(self: RetryingStorage, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    call.__name__ = name
    call.__doc__ = f"`BaseStorage.{name}`, retried through transient faults."
    return call


for _name in [n for n in dir(BaseStorage) if not n.startswith("_")]:
    setattr(RetryingStorage, _name, _delegate(_name))
RetryingStorage.__abstractmethods__ = frozenset()
