"""Optuna's own storage suite (`tests/ledger/optuna_suite`, Optuna 5.1.0) on the storages
`study` builds (`tests/ledger/contract.py`): the journal file of the default ledger, plain; the
RDB storage uncached and cached, retried around each, plain, and the uncached one retried with
a fault injected on every write (the commit's answer lost, the connection dropped at the commit,
the connection dropped mid-call). What ``open_storage`` returns, under the same faults, is in
`test_storage_contract_faults.py` and the storage proxy (an extension) in
`tests/ext/storage_proxy/test_storage_contract.py` (three files, so that the two test processes
share them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ledger.contract import SPECS, StorageSupplier, every_fault_fired  # noqa: F401
from tests.ledger.optuna_suite import storages as optuna_suite


@pytest.fixture(params=[s for s in SPECS if s.startswith("retrying/") or s.endswith("/plain")])
def storage(request: pytest.FixtureRequest) -> Iterator[Any]:
    with StorageSupplier(request.param) as supplied:
        yield supplied


class TestOptunaStorageContract(optuna_suite.TestStorage):
    """Every test of Optuna's suite, on each storage above."""
