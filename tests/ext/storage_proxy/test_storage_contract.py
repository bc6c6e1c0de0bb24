"""Optuna's own storage suite (`tests/ledger/optuna_suite`, Optuna 5.1.0) through the storage
proxy as `study serve-storage` serves it and ``--storage grpc://`` opens it (the ``proxy`` mode
of `tests/ledger/contract.py`'s supplier, added here), plain and with a fault injected on every
write at the database behind the proxy (the commit's answer lost, the connection dropped at the
commit, the connection dropped mid-call): each reaches the client as ``UNAVAILABLE``, which its
retry waits through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from optuna.storages import BaseStorage

from tests.ledger.contract import FAULTS, StorageSupplier, every_fault_fired  # noqa: F401
from tests.ledger.optuna_suite import storages as optuna_suite

#: The proxy plain and under every fault (it is retried: `tests.ledger.contract.RETRIED`).
SPECS = [f"proxy/{fault}" for fault in FAULTS]


class ProxySupplier(StorageSupplier):
    """The storage supplier with the ``proxy`` mode: the client ``--storage grpc://`` opens
    (`open_proxy`), talking to a proxy served as ``study serve-storage`` serves one
    (`server.serve`) on loopback in this process, in front of the cached database."""

    server: Any = None

    def open_mode(self, mode: str, cached: BaseStorage, url: str) -> BaseStorage:
        if mode != "proxy":
            return super().open_mode(mode, cached, url)
        from study.ext.storage_proxy.client import open_proxy
        from study.ext.storage_proxy.server import serve

        self.server = serve(cached, url, "127.0.0.1", 0, threads=4, say=_quiet)
        storage = open_proxy(self.server.address, 60.0)
        storage._sleep = _no_wait  # type: ignore[attr-defined]
        storage.outage.say = _quiet  # type: ignore[attr-defined]
        return storage

    def close_mode(self) -> None:
        self.storage.inner.close()  # type: ignore[union-attr]
        self.server.stop(0)


def _no_wait(seconds: float) -> None:
    """The retry's backoff, skipped (every fault is over at once)."""


def _quiet(line: str) -> None:
    """The outage lines, not printed (faults come and go hundreds of times)."""


@pytest.fixture(params=SPECS)
def storage(request: pytest.FixtureRequest) -> Iterator[Any]:
    with ProxySupplier(request.param) as supplied:
        yield supplied


class TestOptunaStorageContractThroughTheProxy(optuna_suite.TestStorage):
    """Every test of Optuna's suite, through the proxy."""
