"""Optuna's own storage suite (`tests/ledger/optuna_suite`, Optuna 5.1.0) through the storage
proxy as `study serve-storage` serves it and ``--storage grpc://`` opens it
(`tests/ledger/contract.py`), plain and with a fault injected on every write at the database
behind the proxy (the commit's answer lost, the connection dropped at the commit, the connection
dropped mid-call): each reaches the client as ``UNAVAILABLE``, which its retry waits through."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ledger.contract import SPECS, StorageSupplier, every_fault_fired  # noqa: F401
from tests.ledger.optuna_suite import storages as optuna_suite


@pytest.fixture(params=[spec for spec in SPECS if spec.startswith("proxy/")])
def storage(request: pytest.FixtureRequest) -> Iterator[Any]:
    with StorageSupplier(request.param) as supplied:
        yield supplied


class TestOptunaStorageContractThroughTheProxy(optuna_suite.TestStorage):
    """Every test of Optuna's suite, through the proxy."""
