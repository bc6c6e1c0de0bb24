"""The storage proxy's server (``study serve-storage``; `.client` is the client).

`start_proxy` serves a database storage with Optuna's proxy (the servicer that
`optuna.storages.run_grpc_proxy_server` runs, built as its ``make_server`` builds it, with our
interceptors and port) in front of a database opened, checked and cached as
`study.ledger.storage.open_storage` opens it. Optuna's server takes neither credentials nor
interceptors, so the ``grpc.server`` is built here around its servicer: this relies on
``optuna.storages._grpc.servicer.OptunaStorageProxyService`` and the generated
``api_pb2_grpc.add_StorageServiceServicer_to_server`` (what ``make_server`` calls; both
through `study.adapters.optuna_internals.add_storage_servicer`). With a
`study.ext.storage_proxy.access.ServerAccess` it serves TLS (``grpcs://``; client certificates
where it names a CA) and checks the shared token on every call (``UNAUTHENTICATED`` without
it, before any handler runs). A call that meets a transient database fault is
answered ``UNAVAILABLE`` at once, which the workers' retry waits through (see `.client`); the
proxy prints one line when the database stops answering and one when it is back.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from study.adapters.optuna_internals import add_storage_servicer, cache_backend
from study.errors import FieldError
from study.ext.storage_proxy.access import (
    TLS_SCHEME,
    ServerAccess,
    quiet_grpc,
    server_credentials,
    token_check,
)
from study.ext.storage_proxy.client import (
    CHECK_NAME,
    ONCE_NAME,
    SCHEME,
    WRITE_NAME,
    WRITE_SERVICE,
    decode_once,
    decode_writes,
    is_proxy_url,
)
from study.ledger.retry import is_transient
from study.paths import masked

#: Threads that serve the proxy's calls at once (each holds at most one database connection).
THREADS = 16


class ProxyServer:
    """A started proxy: ``address`` (``grpc://HOST:PORT`` or ``grpcs://``, the port bound),
    ``where`` (the
    database, its password masked); `stop` ends it."""

    def __init__(self, server: Any, address: str, where: str, storage: Any) -> None:
        self.server, self.address, self.where = server, address, where
        self._storage = storage

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops or ``timeout`` passes; True if it stopped."""
        return not self.server.wait_for_termination(timeout)  # gRPC: True if it timed out

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving: calls in flight get ``grace`` seconds to finish; the database's
        connections are closed."""
        self.server.stop(grace).wait()
        engine = getattr(cache_backend(self._storage), "engine", None)
        if engine is not None:
            engine.dispose()


def start_proxy(
    url: str,
    host: str,
    port: int,
    *,
    threads: int = THREADS,
    access: ServerAccess | None = None,
    say: Callable[[str], None] | None = None,
) -> ProxyServer:
    """Open the database storage at ``url`` (creating Optuna's tables if missing) and serve
    it at ``host:port`` (port 0: any free port) with Optuna's proxy, with TLS and the token
    ``access`` asks for (None: plain, anyone); ``say`` prints the proxy's outage lines and
    refused clients (stderr by default).

    Raises:
        FieldError: on ``storage``: not a database URL, or it cannot be opened; on ``port``:
            it cannot be bound (in use, or not a port).
    """
    from study.ledger.storage import open_database

    if "://" not in url or is_proxy_url(url) or url.lower().startswith("sqlite"):
        raise FieldError(
            "storage", "must be a database server's URL (postgresql://..., mysql://...)", url
        )
    if not 0 <= port <= 65535:
        raise FieldError("port", "must be a port number from 0 to 65535", port)
    if threads < 1:
        raise FieldError("threads", "must be at least 1", threads)
    _check_free(host, port)  # before gRPC tries: its failure is a log line of its own
    return serve(
        open_database(url), masked(url), host, port, threads=threads, access=access, say=say
    )


def serve(
    storage: Any,
    where: str,
    host: str,
    port: int,
    *,
    threads: int = THREADS,
    access: ServerAccess | None = None,
    say: Callable[[str], None] | None = None,
) -> ProxyServer:
    """Serve an opened database storage (``where``: its URL, masked) as `start_proxy` does,
    with the TLS and token ``access`` asks for (None: plain, anyone).

    Raises:
        FieldError: on ``port``: it cannot be bound.
    """
    quiet_grpc()
    import grpc

    access = access or ServerAccess()
    database = _Database(where, say or _stderr)
    checks = [token_check(access.token, say or _stderr)] if access.token else []
    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads),
        interceptors=[*checks, _unavailable(database)],
        options=[("grpc.so_reuseport", 0)],  # a second proxy on the port fails, not shares it
    )
    add_storage_servicer(storage, server)
    server.add_generic_rpc_handlers((_group_writes(storage), _token_writes(storage)))
    try:
        if access.tls:
            bound = server.add_secure_port(f"{host}:{port}", server_credentials(access))
        else:
            bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:
        bound = 0
    if not bound:
        raise _unbound(host, port)
    server.start()
    shown = f"[{host}]" if ":" in host else host
    scheme = TLS_SCHEME if access.tls else SCHEME
    return ProxyServer(server, f"{scheme}://{shown}:{bound}", where, storage)


def _unbound(host: str, port: int) -> FieldError:
    return FieldError(
        "port", detail=f"cannot listen on {host}:{port} (in use, or not this host's address)"
    )


def _check_free(host: str, port: int) -> None:
    """Raise `_unbound` unless ``host:port`` can be bound now (port 0: always)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise _unbound(host, port) from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(address)
            except OSError:
                raise _unbound(host, port) from None


class _Database:
    """Whether the database behind the proxy answers: one line when it stops, one when it is
    back (what the proxy's log shows of an outage)."""

    def __init__(self, where: str, say: Callable[[str], None]) -> None:
        self.where, self.say = where, say
        self.away_since: float | None = None
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self.away_since is None:
                self.away_since = time.monotonic()
                first = " ".join(str(exc).split()).partition(" (Background on this error")[0]
                self.say(
                    f"study serve-storage: warning: the database {self.where} is not answering "
                    f"({type(exc).__name__}: {first[:160]}); workers are told it is "
                    "unavailable and retry"
                )

    def answered(self, begun: float) -> None:
        """A call begun at ``begun`` (monotonic seconds) answered: the database is back, unless
        the call began before it went away (it was under way, and says nothing of now)."""
        if self.away_since is None:  # the common case: no lock
            return
        with self._lock:
            if self.away_since is not None and begun >= self.away_since:
                seconds = time.monotonic() - self.away_since
                self.away_since = None
                self.say(
                    f"study serve-storage: the database {self.where} answers again "
                    f"(after {seconds:.0f} s)"
                )


def _group_writes(storage: Any) -> Any:
    """The handlers of `WRITE_METHOD`, a group of writes to one trial stored by
    `study.ledger.batch.write` (one transaction at the database), and of `CHECK_METHOD` (an
    empty answer)."""
    import grpc
    import optuna

    from study.ledger import batch

    def write(request: bytes, context: Any) -> bytes:
        writes = decode_writes(request)
        try:
            batch.write(storage, writes)
        except optuna.exceptions.UpdateFinishedTrialError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except KeyError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return b""

    def check(
        request: bytes, context: Any
    ) -> bytes:  # `study.ext.storage_proxy.client.CHECK_METHOD`
        return b""

    return grpc.method_handlers_generic_handler(
        WRITE_SERVICE,
        {
            WRITE_NAME: grpc.unary_unary_rpc_method_handler(write),
            CHECK_NAME: grpc.unary_unary_rpc_method_handler(check),
        },
    )


def _token_writes(storage: Any) -> Any:
    """The handler of `ONCE_METHOD`: a write that carries a token (`study.ledger.tokens`),
    one transaction at the database."""
    import grpc
    import optuna

    from study.ledger import tokens
    from study.ledger.batch import rdb_of

    refused = (
        (optuna.exceptions.DuplicatedStudyError, grpc.StatusCode.ALREADY_EXISTS),
        (optuna.exceptions.UpdateFinishedTrialError, grpc.StatusCode.FAILED_PRECONDITION),
        (KeyError, grpc.StatusCode.NOT_FOUND),
    )

    def once(request: bytes, context: Any) -> bytes:
        op, args = decode_once(request)
        try:
            result = getattr(tokens, op)(rdb_of(storage), *args)
        except tuple(kind for kind, _ in refused) as exc:
            code = next(code for kind, code in refused if isinstance(exc, kind))
            context.abort(code, str(exc))
        return json.dumps(result).encode()

    return grpc.method_handlers_generic_handler(
        WRITE_SERVICE, {ONCE_NAME: grpc.unary_unary_rpc_method_handler(once)}
    )


def _unavailable(database: _Database) -> Any:
    """A server interceptor that answers a call that met a transient database fault with
    ``UNAVAILABLE`` (which the workers' retry waits through) instead of gRPC's ``UNKNOWN``."""
    import grpc

    class Unavailable(grpc.ServerInterceptor):
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = continuation(details)
            if handler is None or handler.unary_unary is None:
                return handler
            inner = handler.unary_unary

            def call(request: Any, context: Any) -> Any:
                begun = time.monotonic()
                try:
                    reply = inner(request, context)
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    database.failed(exc)
                    first = " ".join(str(exc).split())[:300]
                    context.abort(grpc.StatusCode.UNAVAILABLE, f"database: {first}")
                database.answered(begun)
                return reply

            return grpc.unary_unary_rpc_method_handler(
                call,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )

    return Unavailable()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
