"""`study serve-storage`: Optuna's gRPC storage proxy in front of a database, for fleets
(`study.ext.storage_proxy.client`).

Workers then use ``--storage grpc://HOST:PORT`` (``grpcs://`` with TLS) wherever a storage URL
goes; only the proxy holds database connections. Prints one line with the address it serves;
SIGTERM, SIGINT (Ctrl-C) and SIGHUP stop it cleanly (calls in flight finish, exit status 0).

Who may reach it (`study.ext.storage_proxy.access`): on a loopback address (the default,
127.0.0.1) anyone on this host, as before, unless a token is set; on any other address only
clients over TLS (``--tls-cert``, ``--tls-key``) that present the shared token (``--token-file``,
or ``$STUDY_STORAGE_TOKEN_FILE`` / ``$STUDY_STORAGE_TOKEN``) or a client certificate signed by
``--tls-client-ca``; ``--insecure`` serves plain gRPC to anyone who can reach it (a trusted
network) and prints a warning. A database that cannot be opened, a port that cannot be bound,
a missing or unreadable certificate, key or token: one line, exit status 2, the token never
shown. No TensorFlow, no MLflow.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from study.errors import ExitCode, FieldError, UsageError
from study.extension import Lazy

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def add_serve_storage(sub: Any, lazy: Lazy) -> None:
    """``study serve-storage`` on the CLI's subparsers ``sub`` (its handler from ``lazy``)."""
    p = sub.add_parser(
        "serve-storage",
        help="serve a database storage to many workers through Optuna's gRPC proxy",
        description="Run Optuna's gRPC storage proxy in front of a database (PostgreSQL, "
        "MySQL): workers use --storage grpc://HOST:PORT (grpcs:// with TLS) and only the "
        "proxy holds database connections. Any address but loopback needs TLS and a token "
        "(or client certificates), or --insecure. Prints the address it serves; Ctrl-C or "
        "SIGTERM stops it (exit 0).",
    )
    p.add_argument("--storage", metavar="URL", required=True, help="the database's URL")
    p.add_argument("--port", type=int, required=True, help="port to serve on (0: any free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--threads", type=int, default=16, help="calls served at once (default: 16)")
    add_access_flags(p)
    p.set_defaults(handler=lazy("study.ext.storage_proxy.command", "main"))


def add_access_flags(p: argparse.ArgumentParser) -> None:
    """The flags that say who may use the proxy (TLS, the token, client certificates)."""
    g = p.add_argument_group(
        "access",
        "Any address but loopback needs TLS and a token or client certificates, or --insecure.",
    )
    g.add_argument("--tls-cert", metavar="FILE", help="the server's certificate chain (PEM)")
    g.add_argument("--tls-key", metavar="FILE", help="the server's private key (PEM, unencrypted)")
    g.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the shared token every call must present (default: "
        "$STUDY_STORAGE_TOKEN_FILE, else $STUDY_STORAGE_TOKEN); workers set "
        "STUDY_STORAGE_TOKEN_FILE to the same token",
    )
    g.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require client certificates signed by this CA (PEM): mutual TLS",
    )
    g.add_argument(
        "--insecure",
        action="store_true",
        help="serve plain gRPC with no token on a non-loopback address (a trusted network "
        "only: anyone who reaches the port can read and rewrite every study)",
    )


def server_access(args: argparse.Namespace) -> Any:
    """The `ServerAccess` the flags ask for, checked against ``--host``: TLS and a token or
    client CA off loopback unless ``--insecure``.

    Raises:
        UsageError: a flag without its partner, a file that cannot be read, or an address
            other hosts reach without TLS and credentials (one line naming what is missing).
    """
    from study.ext.storage_proxy.access import (
        TOKEN_ENV,
        TOKEN_FILE_ENV,
        ServerAccess,
        env_token,
        is_loopback,
        read_key_pair,
        read_pem,
        read_token,
    )

    if bool(args.tls_cert) != bool(args.tls_key):
        given, missing = (
            ("--tls-cert", "--tls-key") if args.tls_cert else ("--tls-key", "--tls-cert")
        )
        raise UsageError(f"{given} needs {missing} too (the certificate and its private key)")
    if args.insecure and (args.tls_cert or args.tls_client_ca):
        raise UsageError("--insecure serves without TLS: drop it, or drop --tls-cert/--tls-key")
    if args.tls_client_ca and not args.tls_cert:
        raise UsageError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS)")
    try:
        token = (
            read_token(args.token_file, f"--token-file {args.token_file}")
            if args.token_file
            else env_token()
        )
        cert = key = ca = None
        if args.tls_cert:
            cert, key = read_key_pair(args.tls_cert, args.tls_key, ("tls_cert", "tls_key"))
        if args.tls_client_ca:
            ca = read_pem(args.tls_client_ca, "ca", "tls_client_ca")
    except FieldError as err:
        raise err.named(f"--{err.field.replace('_', '-')}") from None
    host = args.host
    if not is_loopback(host) and not args.insecure:
        if cert is None:
            raise UsageError(
                f"binding {host} needs --tls-cert and --tls-key (or --insecure on a trusted "
                "network)"
            )
        if token is None and ca is None:
            raise UsageError(
                f"binding {host} needs a token (--token-file FILE, or {TOKEN_FILE_ENV}) or "
                "client certificates (--tls-client-ca FILE), or --insecure on a trusted network"
            )
    if token is not None and cert is None and not is_loopback(host):
        raise UsageError(
            f"the token from {token.source} would cross the network in the clear: add "
            f"--tls-cert and --tls-key, or unset {TOKEN_FILE_ENV} and {TOKEN_ENV} for --insecure"
        )
    return ServerAccess(cert, key, ca, token)


def main(args: argparse.Namespace) -> int:
    from study.ext.storage_proxy.access import is_loopback
    from study.ext.storage_proxy.server import start_proxy

    access = server_access(args)
    if args.insecure and not is_loopback(args.host):
        print(
            f"study serve-storage: warning: --insecure: serving {args.host} without TLS or a "
            "token; anyone who can reach the port can read and rewrite every study "
            "(a trusted network only)",
            file=sys.stderr,
            flush=True,
        )
    try:
        proxy = start_proxy(args.storage, args.host, args.port, threads=args.threads, access=access)
    except FieldError as err:
        raise err.named(f"--{err.field.replace('_', '-')}") from None
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        print(
            f"study serve-storage: serving {proxy.where} at {proxy.address} "
            f"(workers: --storage {proxy.address}; Ctrl-C or SIGTERM stops it)",
            flush=True,
        )
        while not stop.is_set() and not proxy.wait(0.5):
            pass
    finally:
        proxy.stop()
        for s, h in previous.items():
            signal.signal(s, h)
    return ExitCode.OK
