"""Optuna's gRPC storage proxy: one server process in front of the database, many workers
talking to it (``grpc://HOST:PORT``, or ``grpcs://HOST:PORT`` over TLS) instead of each holding
database connections. TLS, the shared token and client certificates: `.access`.

`open_proxy` is the client: Optuna's `GrpcStorageProxy`, wrapped in
`study.ledger.retry.RetryingStorage` like a database storage; `.server` is the server.

Outages (see `study.ledger.retry`): the proxy does not wait for the database itself. A
transient database fault (`is_transient`) is answered at once as gRPC ``UNAVAILABLE`` (the
proxy prints one line when the database goes away and one when it is back), and so is a proxy
that is down or restarting; each worker's own retry waits through either, with its window, its
two lines, its exit 75 past the window and its heartbeat grace extended across the outage, the
same as on the database directly. The gRPC codes the retry takes for transient
(`TRANSIENT_GRPC`, by `grpc_fault`, the client's `study.ledger.retry.OwnFaults`):
``UNAVAILABLE`` (the proxy down or restarting, or the database behind it away),
``DEADLINE_EXCEEDED``, ``ABORTED``, ``RESOURCE_EXHAUSTED``; every other code is an answer (``NOT_FOUND``, ``ALREADY_EXISTS``, ``FAILED_PRECONDITION`` are
Optuna's KeyError, DuplicatedStudyError, UpdateFinishedTrialError) or a fault that waiting does
not mend (``UNKNOWN``: the proxy raised), raised at once.

What the ledger does besides Optuna's storage API: a group of writes to one trial in one
database transaction (`study.ledger.batch`), which Optuna's gRPC API has no call for. The
proxy adds one, `WRITE_METHOD` (the group as JSON, stored by `batch.write` at the proxy in one
transaction), and the client offers it as ``write_trial``; a proxy without it (``UNIMPLEMENTED``,
another version) gets one call per write instead. And the writes that carry a token
(`study.ledger.tokens`: creating a study, taking or finishing a trial), one transaction at the
proxy by its `ONCE_METHOD` (``once``); against a proxy without it they are Optuna's calls (and
a retry cannot tell its own study or trial from another process's). Everything else (claims by
trial numbering, heartbeats as system attributes, the retry's "did that write land" reads) is
Optuna's API, which the proxy serves whole.

What this relies on of Optuna beyond its public API (``optuna.storages.GrpcStorageProxy``),
all in `_proxy_class`: the client's ``_setup`` (it makes ``_channel``, ``_stub``, ``_cache``;
ours makes the channel with TLS and call credentials, `access.open_channel`), the
generated ``api_pb2_grpc.StorageServiceStub`` and ``GrpcClientCache`` of
``optuna.storages._grpc`` (through `study.adapters.optuna_internals.grpc_stub_and_cache`);
`study.ext.storage_proxy.server` uses its servicer.

Example: ``start_proxy("postgresql://study:pw@db/ledger", "127.0.0.1", 13000)`` serves it at
``grpc://127.0.0.1:13000``; ``open_proxy("grpc://127.0.0.1:13000", 300.0)`` reaches it.
"""

from __future__ import annotations

import functools
import json
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import optuna

from study.adapters.optuna_internals import grpc_stub_and_cache
from study.errors import FieldError
from study.ext.storage_proxy.access import TLS_SCHEME, ClientAccess, client_access, open_channel
from study.ledger.retry import RetryingStorage

#: The URL scheme of a storage served by a proxy (`TLS_SCHEME` over TLS).
SCHEME = "grpc"
#: Seconds to wait for a proxy to answer when a storage is opened.
CONNECT_TIMEOUT = 10
#: gRPC status codes that mean the proxy (or the database behind it) is away for now.
TRANSIENT_GRPC = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "RESOURCE_EXHAUSTED"})


def is_proxy_url(url: str | None) -> bool:
    """Whether ``url`` names a storage proxy (``grpc://HOST:PORT``, ``grpcs://HOST:PORT``)."""
    return bool(url) and str(url).lower().startswith((f"{SCHEME}://", f"{TLS_SCHEME}://"))


def proxy_address(url: str) -> tuple[str, int]:
    """The host and port of ``grpc://HOST:PORT`` or ``grpcs://HOST:PORT``.

    Raises:
        FieldError: on ``storage``: no host, no port, or a path, query or password.
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None or parts.path not in ("", "/") or parts.query:
        raise FieldError(
            "storage",
            "must be grpc://HOST:PORT or grpcs://HOST:PORT (a `study serve-storage` address)",
            url,
        )
    return parts.hostname, port


def open_proxy(
    url: str, window: float, *, now: Callable[[], float] = time.time
) -> optuna.storages.BaseStorage:
    """The storage served by the proxy at ``grpc://HOST:PORT`` (or ``grpcs://``, TLS), retried
    like a database storage (``window``: seconds, see `study.ledger.retry`); what it presents
    (a CA, a token, a client certificate) comes from the environment,
    `study.ext.storage_proxy.access.client_access`.

    Raises:
        FieldError: on ``storage``: a malformed URL, a CA or token that cannot be read, nothing
            listening there (at once), a failed TLS handshake or a refused token (at once), or
            no proxy answers there within `CONNECT_TIMEOUT` seconds.
    """
    host, port = proxy_address(url)
    access = client_access(url)
    _check_listening(url, host, port)
    proxy = _proxy_class()(host=host, port=port, access=access, url=url)
    try:
        proxy.check(url)
    except FieldError:
        proxy.close()
        raise
    return RetryingStorage(proxy, url, window, faults=grpc_fault, now=now)


def grpc_fault(exc: BaseException, limit: int) -> str | None:
    """A gRPC error with a transient status code (`TRANSIENT_GRPC`) in one line, ``gRPC
    UNAVAILABLE: failed to connect ...`` (its details cut at ``limit`` characters); None for
    any other exception (the client's `study.ledger.retry.OwnFaults`). Matched by the class's
    name, as the retry matches the drivers' faults."""
    if "RpcError" not in {cls.__name__ for cls in type(exc).__mro__}:
        return None
    try:
        code = str(getattr(exc.code(), "name", ""))  # type: ignore[attr-defined]
    except Exception:
        return None
    if code not in TRANSIENT_GRPC:
        return None
    try:
        details = str(exc.details())  # type: ignore[attr-defined]
    except Exception:
        details = ""
    return f"gRPC {code}: {' '.join(details.split())[:limit]}"


def _check_listening(url: str, host: str, port: int) -> None:
    """Fail at once where the host refuses the connection (nothing listens on that port), as
    a database's driver does, instead of gRPC trying again until `CONNECT_TIMEOUT`; a host
    silent for that long fails as gRPC would after it (not after a second wait). Anything else
    (unreachable, a name that does not resolve) is left to gRPC.

    Raises:
        FieldError: on ``storage``: the connection was refused, or not answered in time.
    """
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except ConnectionRefusedError:
        raise FieldError(
            "storage",
            detail=f"cannot open {url!r}: nothing listens on {host}:{port} (connection "
            "refused; is `study serve-storage` running there, on that port?)",
        ) from None
    except TimeoutError:  # the host did not answer: neither would gRPC, no second wait
        raise _no_answer(url) from None
    except OSError:  # unreachable, a name that does not resolve: gRPC says it
        pass


def _no_answer(url: str) -> FieldError:
    return FieldError(
        "storage",
        detail=f"cannot open {url!r}: no storage proxy answered in {CONNECT_TIMEOUT} s "
        "(is `study serve-storage` running there, on that port?)",
    )


#: gRPC channel options of the client: Optuna's (no limit on a reply's size), and reconnection
#: attempts at most `RECONNECT_MS` apart (gRPC's default backs off to 120 s, so a proxy back
#: after a minute's outage was found 24 s late; the retry's own backoff is at most 10 s).
RECONNECT_MS = 2000
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_MS),
)


@functools.cache
def _proxy_class() -> type:
    """Optuna's `GrpcStorageProxy` with `CHANNEL_OPTIONS` on its channel and the group write
    (its ``_setup`` makes the channel, the stub and the trial cache; a test checks that a
    proxy restarted on the same port is found again within seconds)."""
    import grpc
    from optuna.storages import GrpcStorageProxy

    class Proxy(GrpcStorageProxy):
        def __init__(self, *, host: str, port: int, access: ClientAccess, url: str) -> None:
            # what GrpcStorageProxy.__init__ does, without its warning that the class is
            # experimental (since Optuna 4.2): once per storage, from any thread
            self._host, self._port, self._access, self._url = host, port, access, url
            self._setup()

        def _setup(self) -> None:
            refused = functools.partial(_refused, self._url, self._access)
            self._channel = open_channel(
                self._host, self._port, self._access, list(CHANNEL_OPTIONS), refused
            )
            self._stub, self._cache = grpc_stub_and_cache(self._channel)
            self._write = self._channel.unary_unary(WRITE_METHOD)
            self._grouped = True
            self._once = self._channel.unary_unary(ONCE_METHOD)
            self._onced = True

        def __reduce__(self) -> tuple[Any, ...]:  # a class made here: pickled by its address
            return (_reopen, (self._host, self._port, self._access, self._url))

        def once(self, op: str, *args: Any, missing: Any = None) -> Any:
            """Run the token write ``op`` of `study.ledger.tokens` (``create_study``,
            ``set_state``) at the proxy, in one transaction (`ONCE_METHOD`); ``missing`` if
            this proxy has no such method (another version).

            Raises:
                optuna.exceptions.DuplicatedStudyError: the study exists.
                optuna.exceptions.UpdateFinishedTrialError: the trial is finished.
                KeyError: no such study or trial.
            """
            if not self._onced:
                return missing
            try:
                reply = self._once(encode_once(op, args))
            except grpc.RpcError as exc:
                code, details = exc.code(), exc.details()  # type: ignore[attr-defined]
                if code == grpc.StatusCode.UNIMPLEMENTED:
                    self._onced = False
                    return missing
                refused = _REFUSED.get(code.name)
                if refused is not None:
                    raise refused(details) from exc
                raise
            return json.loads(reply)

        def check(self, url: str) -> None:
            """Wait until the proxy answers a call (`CHECK_METHOD`), as Optuna's
            ``wait_server_ready`` does but over this channel (TLS, the token).

            Raises:
                FieldError: see `check_answer`.
            """
            check_answer(self._channel.unary_unary(CHECK_METHOD), url, self._access)

        def write_trial(self, writes: Any) -> bool:
            """Store a group of writes to one trial in one call (`WRITE_METHOD`); False if
            this proxy has no such method (the caller writes them one call each).

            Raises:
                optuna.exceptions.UpdateFinishedTrialError: the trial is closed already.
                KeyError: no such trial.
            """
            if not self._grouped:
                return False
            try:
                self._write(encode_writes(writes))
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
                if code == grpc.StatusCode.UNIMPLEMENTED:
                    self._grouped = False
                    return False
                if code == grpc.StatusCode.FAILED_PRECONDITION:
                    raise optuna.exceptions.UpdateFinishedTrialError(exc.details()) from exc  # type: ignore[attr-defined]
                if code == grpc.StatusCode.NOT_FOUND:
                    raise KeyError(exc.details()) from exc  # type: ignore[attr-defined]
                raise
            return True

    return Proxy


def _reopen(host: str, port: int, access: ClientAccess, url: str) -> Any:
    """A proxy client (`open_proxy`'s, unretried) unpickled: connected anew, with the same
    credentials."""
    return _proxy_class()(host=host, port=port, access=access, url=url)


#: What a refused `ONCE_METHOD` call raises, by its gRPC status code.
_REFUSED: dict[str, type[Exception]] = {
    "ALREADY_EXISTS": optuna.exceptions.DuplicatedStudyError,
    "FAILED_PRECONDITION": optuna.exceptions.UpdateFinishedTrialError,
    "NOT_FOUND": KeyError,
}
#: The proxy's method for the writes that carry a token (`study.ledger.tokens`): the operation
#: and its arguments as JSON (`encode_once`), the result as JSON.
ONCE_NAME = "Once"
ONCE_METHOD = f"/study.Ledger/{ONCE_NAME}"


def encode_once(op: str, args: Any) -> bytes:
    """A token write (``create_study``: directions, name, token; ``set_state``: trial id,
    state, values, token) as JSON bytes."""
    if op == "create_study":
        directions, name, token = args
        return json.dumps([op, [int(d) for d in directions], name, token]).encode()
    trial_id, state, values, token = args
    listed = None if values is None else [float(v) for v in values]
    return json.dumps([op, trial_id, state.name, listed, token]).encode()


def decode_once(data: bytes) -> tuple[str, tuple[Any, ...]]:
    """The operation and arguments `encode_once` gave ``data`` for."""
    from optuna.study import StudyDirection
    from optuna.trial import TrialState

    op, *raw = json.loads(data)
    if op == "create_study":
        directions, name, token = raw
        return op, ([StudyDirection(d) for d in directions], name, token)
    if op == "set_state":
        trial_id, state, values, token = raw
        return op, (int(trial_id), TrialState[state], values, token)
    raise ValueError(f"no such token write: {op!r}")


#: The proxy's own method (beside Optuna's service): a group of writes to one trial
#: (`study.ledger.batch.TrialWrites`, as `encode_writes` gives it) stored in one transaction.
WRITE_SERVICE, WRITE_NAME = "study.Ledger", "WriteTrial"
WRITE_METHOD = f"/{WRITE_SERVICE}/{WRITE_NAME}"
#: The proxy's method that answers an empty reply at once: the client's first call, which
#: shows the TLS handshake and the token work (a proxy without it answers UNIMPLEMENTED).
CHECK_NAME = "Check"
CHECK_METHOD = f"/{WRITE_SERVICE}/{CHECK_NAME}"
#: Seconds a proxy may keep closing the connection before the client says why it may
#: (it serves TLS and the URL is grpc://, or it wants a client certificate).
CLOSED_WAIT = 2.0


def check_answer(call: Callable[..., Any], url: str, access: ClientAccess) -> None:
    """Call ``call`` (`CHECK_METHOD`) until the proxy answers, for up to `CONNECT_TIMEOUT`
    seconds; an answer that refuses the client, and a failed TLS handshake, end it at once.

    Raises:
        FieldError: on ``storage``: the TLS handshake failed (the hint names the CA), the
            proxy kept closing the connection for `CLOSED_WAIT` s, or no answer in time; the
            token was refused or missing (``call`` raises it, `_refused`).
    """
    import grpc

    start = time.monotonic()
    closed_since: float | None = None
    while True:
        left = start + CONNECT_TIMEOUT - time.monotonic()
        if left <= 0:
            raise _no_answer(url)
        try:
            call(b"", timeout=left)
            return
        except grpc.RpcError as exc:
            code, details = exc.code(), " ".join((exc.details() or "").split())  # type: ignore[attr-defined]
        if code != grpc.StatusCode.UNAVAILABLE:
            return  # an answer (UNIMPLEMENTED: a proxy without the check)
        if "handshake failed" in details.lower() or "verification" in details.lower():
            raise _tls_failed(url, access, details)
        if details.endswith("Socket closed"):
            closed_since = closed_since or time.monotonic()
            if time.monotonic() - closed_since >= CLOSED_WAIT:
                raise _closed(url, access)
        else:
            closed_since = None
        time.sleep(0.1)


def _refused(url: str, access: ClientAccess, details: str) -> FieldError:
    """The one line for a call the proxy at ``url`` refused (``details``: its reason): no
    token sent, or the token from ``access.token.source`` (never the token itself)."""
    from study.ext.storage_proxy.access import TOKEN_FILE_ENV

    if access.token is None:
        text = (
            f"wants the fleet's token and none was sent (set {TOKEN_FILE_ENV} to the file "
            "that holds it)"
        )
    else:
        text = (
            f"refused the token from {access.token.source} ({details}); use the token the "
            "proxy was started with"
        )
    return FieldError("storage", detail=f"the proxy at {url!r} {text}")


def _tls_failed(url: str, access: ClientAccess, details: str) -> FieldError:
    reason = details.rpartition("OPENSSL_internal:")[2] or details.rpartition(": ")[2]
    reason = reason.removesuffix(": OK")  # gRPC's status of the verification, not a reason
    lowered = details.lower()
    if "wrong_version_number" in lowered:
        hint = "the proxy does not serve TLS there: its URL is grpc://HOST:PORT"
    elif "hostname verification" in lowered:
        hint = f"the proxy's certificate does not name {proxy_address(url)[0]!r}"
    else:
        hint = f"is {access.ca_source} the CA that signed the proxy's certificate?"
    return FieldError(
        "storage", detail=f"cannot open {url!r}: the TLS handshake failed ({reason}; {hint})"
    )


def _closed(url: str, access: ClientAccess) -> FieldError:
    from study.ext.storage_proxy.access import CERT_ENV, KEY_ENV

    if not access.tls:
        hint = "a proxy served with TLS is grpcs://HOST:PORT"
    elif access.cert is None:
        hint = f"a proxy that asks for a client certificate: set {CERT_ENV} and {KEY_ENV}"
    else:
        hint = "is the client certificate signed by the CA the proxy trusts?"
    return FieldError(
        "storage",
        detail=f"cannot open {url!r}: the proxy closes every connection ({hint})",
    )


def encode_writes(writes: Any) -> bytes:
    """A `TrialWrites` as JSON bytes (parameters as their distribution and internal value)."""
    from optuna.distributions import distribution_to_json

    return json.dumps(
        {
            "trial_id": writes.trial_id,
            "user": writes.user,
            "system": writes.system,
            "params": {
                name: [distribution_to_json(dist), dist.to_internal_repr(value)]
                for name, (value, dist) in writes.params.items()
            },
            "intermediate": [[step, value] for step, value in writes.intermediate.items()],
            "state": None if writes.state is None else writes.state.name,
            "values": None if writes.values is None else list(writes.values),
        }
    ).encode()


def decode_writes(data: bytes) -> Any:
    """The `TrialWrites` that `encode_writes` gave ``data`` for."""
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState

    from study.ledger.batch import TrialWrites

    raw = json.loads(data)
    params = {}
    for name, (dist_json, internal) in raw["params"].items():
        dist = json_to_distribution(dist_json)
        params[name] = (dist.to_external_repr(internal), dist)
    return TrialWrites(
        trial_id=int(raw["trial_id"]),
        user=raw["user"],
        system=raw["system"],
        params=params,
        intermediate={int(step): float(value) for step, value in raw["intermediate"]},
        state=None if raw["state"] is None else TrialState[raw["state"]],
        values=raw["values"],
    )
