"""The storage proxy: Optuna's gRPC proxy in front of a database, for fleets.

``study serve-storage`` (`.command`) serves a database storage (`.server`); every command then
reaches it at ``--storage grpc://HOST:PORT`` (``grpcs://`` over TLS), opened by `.client`, with
the CA and the shared token of `.access` (``--storage-ca``, ``--storage-token-file``, or
``$STUDY_STORAGE_CA``, ``$STUDY_STORAGE_TOKEN_FILE``). This module registers the command, the
two URL schemes and the two flags with the core; it imports neither gRPC nor Optuna.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from study.extension import Extension, Lazy, StorageOpener, register

#: The URL schemes of a storage served by the proxy: plain gRPC, and gRPC over TLS.
SCHEMES = ("grpc", "grpcs")


def open_proxy_storage(url: str, window: float, now: Callable[[], float]) -> Any:
    """The `study.extension.StorageOpener` of ``grpc://`` and ``grpcs://``
    (`study.ext.storage_proxy.client.open_proxy`)."""
    from study.ext.storage_proxy.client import open_proxy

    return open_proxy(url, window, now=now)


@register
class StorageProxy(Extension):
    """``study serve-storage``, and ``--storage grpc://`` / ``grpcs://`` with its CA and
    token."""

    name = "storage_proxy"
    summary = "serve a database storage to many workers through Optuna's gRPC proxy"
    storage_urls = (
        "grpc://HOST:PORT or grpcs://HOST:PORT (a `study serve-storage` proxy, plain or TLS)"
    )

    def add_commands(self, sub: Any, lazy: Lazy) -> None:
        from study.ext.storage_proxy.command import add_serve_storage

        add_serve_storage(sub, lazy)

    def storage_schemes(self) -> Mapping[str, StorageOpener]:
        return dict.fromkeys(SCHEMES, open_proxy_storage)

    def add_storage_flags(self, p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--storage-ca",
            metavar="FILE",
            help="the CA (PEM) that signed a grpcs:// proxy's certificate (default: "
            "$STUDY_STORAGE_CA, else the system's roots)",
        )
        p.add_argument(
            "--storage-token-file",
            metavar="FILE",
            help="a file holding the proxy's shared token (default: $STUDY_STORAGE_TOKEN_FILE, "
            "else $STUDY_STORAGE_TOKEN)",
        )

    def storage_environment(self, args: argparse.Namespace) -> Mapping[str, str | None]:
        """``--storage-ca`` and ``--storage-token-file`` as ``$STUDY_STORAGE_CA`` and
        ``$STUDY_STORAGE_TOKEN_FILE`` (``$STUDY_STORAGE_TOKEN`` unset: the file wins)."""
        from study.ext.storage_proxy.access import CA_ENV, TOKEN_ENV, TOKEN_FILE_ENV

        ca, token_file = (
            getattr(args, "storage_ca", None),
            getattr(args, "storage_token_file", None),
        )
        values: dict[str, str | None] = {}
        if ca:
            values[CA_ENV] = ca
        if token_file:
            values |= {TOKEN_FILE_ENV: token_file, TOKEN_ENV: None}
        return values
