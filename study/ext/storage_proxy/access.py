"""Who may use the storage proxy, and over what: TLS and a shared token for
``study serve-storage`` (`study.ext.storage_proxy.server`) and its clients
(`study.ext.storage_proxy.client`).

Two URL schemes: ``grpc://HOST:PORT`` is plain gRPC (a proxy on loopback, or one served as
insecure on a trusted network); ``grpcs://HOST:PORT`` is gRPC over TLS, the proxy's
certificate checked against the CA in ``$STUDY_STORAGE_CA`` (a PEM file; unset: the system's
roots) and its name against ``HOST``. What a client presents comes from its environment (the
command line's storage options set the same variables):

* ``STUDY_STORAGE_TOKEN_FILE``: a file holding the fleet's shared token (one line, at least
  `MIN_TOKEN` characters: ``openssl rand -hex 32``), or ``STUDY_STORAGE_TOKEN``, the token
  itself (for a secret store that sets variables); never a command-line value, which ``ps``
  shows. The server reads the same variables unless given a file.
* ``STUDY_STORAGE_CERT`` and ``STUDY_STORAGE_KEY``: a client certificate and its key, for a
  proxy that asks for one (mutual TLS).

The token travels as gRPC call credentials (``authorization: Bearer ...`` metadata): over TLS
for ``grpcs://``, and over gRPC's local credentials for ``grpc://`` on a loopback address (a
proxy on 127.0.0.1 that other users of the host must not reach); never over a plain network
connection. The server checks it on every call (`token_check`) and answers a missing or wrong
one ``UNAUTHENTICATED``. No message here or in the proxy's log holds the token; they name
where it came from (`Token.source`).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.errors import FieldError, UsageError

#: The URL scheme of a proxy served over TLS.
TLS_SCHEME = "grpcs"
#: A file holding the shared token (server and clients).
TOKEN_FILE_ENV = "STUDY_STORAGE_TOKEN_FILE"
#: The shared token itself (server and clients), where a file is not set.
TOKEN_ENV = "STUDY_STORAGE_TOKEN"
#: The CA (PEM) a client trusts for a ``grpcs://`` proxy's certificate.
CA_ENV = "STUDY_STORAGE_CA"
#: A client's certificate and key (PEM), for a proxy that asks for one (mutual TLS).
CERT_ENV, KEY_ENV = "STUDY_STORAGE_CERT", "STUDY_STORAGE_KEY"
#: The fewest characters a token may have (``openssl rand -hex 32`` gives 64).
MIN_TOKEN = 16
#: The call metadata that carries the token (gRPC's access-token call credentials).
_HEADER, _BEARER = "authorization", "Bearer "


@dataclass(frozen=True)
class Token:
    """The shared token (``value``, never shown) and where it came from (``source``, e.g.
    ``STUDY_STORAGE_TOKEN_FILE=/etc/study/token``), which messages name instead."""

    value: str = field(repr=False)
    source: str

    def matches(self, presented: str) -> bool:
        """Whether ``presented`` is this token (compared in constant time)."""
        return hmac.compare_digest(presented.encode(), self.value.encode())


def read_token(path: str | os.PathLike[str], source: str) -> Token:
    """The token in the file at ``path`` (its first line, without surrounding spaces);
    ``source`` names it in messages.

    Raises:
        UsageError: the file cannot be read, is empty, or its token is too short.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{source}: cannot read the token file ({_reason(exc)})") from None
    return _token(text.strip().partition("\n")[0].strip(), source)


def _token(value: str, source: str) -> Token:
    if len(value) < MIN_TOKEN or any(c.isspace() for c in value):
        raise UsageError(
            f"{source}: the token must be one word of at least {MIN_TOKEN} characters "
            "(make one with `openssl rand -hex 32`)"
        )
    return Token(value, source)


def env_token(environ: Mapping[str, str] = os.environ) -> Token | None:
    """The token `TOKEN_FILE_ENV` or `TOKEN_ENV` sets (None: neither).

    Raises:
        UsageError: both are set, the file cannot be read, or the token is too short.
    """
    path, value = environ.get(TOKEN_FILE_ENV) or "", environ.get(TOKEN_ENV) or ""
    if path and value:
        raise UsageError(f"set one of {TOKEN_FILE_ENV} and {TOKEN_ENV}, not both")
    if path:
        return read_token(path, f"{TOKEN_FILE_ENV}={path}")
    return _token(value.strip(), TOKEN_ENV) if value else None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``, which only
    this host can reach."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or " ".join(str(exc).split()) or type(exc).__name__


def read_pem(path: str, what: str, name: str) -> bytes:
    """The PEM file at ``path``, checked with Python's ``ssl`` (``what``: ``cert``, ``ca``);
    errors name it ``name`` (a field, or a variable).

    Raises:
        FieldError: on ``name``: unreadable, or not PEM certificates.
    """
    try:
        data = Path(path).read_bytes()
        if what == "ca":
            ssl.create_default_context(cadata=data.decode("ascii"))
    except (OSError, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise FieldError(name, detail=f"cannot read {path!r} ({_reason(exc)})") from None
    return data


def read_key_pair(cert: str, key: str, names: tuple[str, str]) -> tuple[bytes, bytes]:
    """A certificate and its private key (PEM, the key not encrypted), checked to belong
    together; ``names``: the two fields errors name.

    Raises:
        FieldError: either unreadable, not PEM, or the key is not the certificate's.
    """
    data = read_pem(cert, "cert", names[0]), read_pem(key, "key", names[1])
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password="")
    except ssl.SSLError as exc:
        raise FieldError(
            names[1],
            detail=f"{key!r} is not the unencrypted private key of the certificate {cert!r} "
            f"({_reason(exc)})",
        ) from None
    return data


@dataclass(frozen=True)
class ServerAccess:
    """What ``study serve-storage`` asks of its clients: TLS with ``cert`` and ``key`` (PEM;
    None: plain), client certificates signed by ``client_ca`` (mutual TLS), a ``token``."""

    cert: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    client_ca: bytes | None = field(default=None, repr=False)
    token: Token | None = None

    @property
    def tls(self) -> bool:
        return self.cert is not None


@dataclass(frozen=True)
class ClientAccess:
    """What a client presents: TLS (``grpcs://``) trusting ``ca`` (None: the system's roots),
    a client certificate ``cert``/``key`` (mutual TLS), a ``token``; ``ca_source`` names the
    CA in messages."""

    tls: bool
    ca: bytes | None = field(default=None, repr=False)
    cert: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    token: Token | None = None
    ca_source: str = "the system's roots"


def client_access(url: str, environ: Mapping[str, str] = os.environ) -> ClientAccess:
    """What a client of the proxy at ``url`` presents, from `CA_ENV`, `CERT_ENV`, `KEY_ENV`,
    `TOKEN_FILE_ENV` and `TOKEN_ENV`.

    Raises:
        FieldError: on ``storage``: a file those name cannot be read, or the token is bad.
    """

    def problem(text: str) -> FieldError:
        return FieldError("storage", detail=f"cannot open {url!r}: {text}")

    tls = url.lower().startswith(f"{TLS_SCHEME}://")
    try:
        token = env_token(environ)
        ca_path, cert_path, key_path = (environ.get(n) or "" for n in (CA_ENV, CERT_ENV, KEY_ENV))
        if bool(cert_path) != bool(key_path):
            raise UsageError(f"set both {CERT_ENV} and {KEY_ENV} (a client certificate), or none")
        if not tls:
            return ClientAccess(False, token=token)
        ca = read_pem(ca_path, "ca", f"{CA_ENV}={ca_path}") if ca_path else None
        cert = key = None
        if cert_path:
            names = (f"{CERT_ENV}={cert_path}", f"{KEY_ENV}={key_path}")
            cert, key = read_key_pair(cert_path, key_path, names)
    except UsageError as exc:
        raise problem(str(exc)) from None
    source = f"{CA_ENV}={ca_path}" if ca_path else "the system's roots"
    return ClientAccess(True, ca, cert, key, token, source)


def quiet_grpc() -> None:
    """gRPC's own log at errors only (unless ``GRPC_VERBOSITY`` says otherwise): its
    informational line for each failed TLS handshake would follow a client's one-line error.
    Takes effect where gRPC is not imported yet."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def open_channel(
    host: str,
    port: int,
    access: ClientAccess,
    options: list[Any],
    refused: Callable[[str], Exception],
) -> Any:
    """A gRPC channel to ``host:port``: TLS for ``access.tls``, the token as call credentials
    (over TLS, or gRPC's local credentials on loopback; a plain connection elsewhere gets no
    token); a call the proxy answers ``UNAUTHENTICATED`` raises ``refused(details)`` (at the
    first call, or a proxy restarted with another token mid-study)."""
    quiet_grpc()
    import grpc

    return grpc.intercept_channel(_channel(host, port, access, options), _refusals(refused))


def _channel(host: str, port: int, access: ClientAccess, options: list[Any]) -> Any:
    import grpc

    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if access.tls:
        credentials = grpc.ssl_channel_credentials(access.ca, access.key, access.cert)
    elif access.token is not None and is_loopback(host):
        credentials = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        return grpc.insecure_channel(target, options=options)
    if access.token is not None:
        token = grpc.access_token_call_credentials(access.token.value)
        credentials = grpc.composite_channel_credentials(credentials, token)
    return grpc.secure_channel(target, credentials, options=options)


def server_credentials(access: ServerAccess) -> Any:
    """gRPC's TLS credentials for a server with ``access.cert`` (client certificates required
    where ``access.client_ca`` is set)."""
    quiet_grpc()
    import grpc

    return grpc.ssl_server_credentials(
        [(access.key, access.cert)],
        root_certificates=access.client_ca,
        require_client_auth=access.client_ca is not None,
    )


@functools.cache
def _refusals_class() -> type:
    import grpc

    class Refusals(grpc.UnaryUnaryClientInterceptor):
        """Raises ``refused(details)`` for a call answered ``UNAUTHENTICATED``."""

        def __init__(self, refused: Callable[[str], Exception]) -> None:
            self.refused = refused

        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            outcome = continuation(details, request)
            if outcome.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise self.refused(" ".join((outcome.details() or "").split()))
            return outcome

    return Refusals


def _refusals(refused: Callable[[str], Exception]) -> Any:
    """A `_refusals_class` interceptor (the class is made where gRPC is imported, once)."""
    return _refusals_class()(refused)


#: What a refused call is told (the client's one line quotes it).
NO_TOKEN, WRONG_TOKEN = "no token was sent", "wrong token"


def token_check(token: Token, say: Callable[[str], None]) -> Any:
    """A server interceptor that answers every call without ``token`` (`NO_TOKEN`,
    `WRONG_TOKEN`) with ``UNAUTHENTICATED``, before any handler runs; ``say`` prints one line
    for the first refusal of each peer host (its address and why, never what it sent)."""
    import grpc

    refused: set[str] = set()
    lock = threading.Lock()

    class TokenCheck(grpc.ServerInterceptor):
        def intercept_service(self, continuation: Any, details: Any) -> Any:
            sent = next((v for k, v in details.invocation_metadata or () if k == _HEADER), None)
            if isinstance(sent, str) and sent.startswith(_BEARER):
                if token.matches(sent[len(_BEARER) :]):
                    return continuation(details)
                why = WRONG_TOKEN
            else:
                why = NO_TOKEN

            def deny(request: Any, context: Any) -> Any:
                peer = context.peer().rpartition(":")[0]
                with lock:
                    first = peer not in refused
                    refused.add(peer)
                if first:
                    say(f"study serve-storage: refused calls from {peer}: {why}")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, why)

            return grpc.unary_unary_rpc_method_handler(deny)

    return TokenCheck()
