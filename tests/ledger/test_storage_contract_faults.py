"""Optuna's own storage suite (`tests/ledger/optuna_suite`, Optuna 5.1.0) on what
``open_storage("sqlite:///...")`` returns (`RetryingStorage` around Optuna's trial cache around
the RDB storage, `tests/ledger/contract.py`) with a fault injected on every write: the commit's
answer lost, the connection dropped at the commit, the connection dropped mid-call. Its plain
runs are in `test_storage_contract.py`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ledger.contract import SPECS, StorageSupplier, every_fault_fired  # noqa: F401
from tests.ledger.optuna_suite import storages as optuna_suite


@pytest.fixture(params=[s for s in SPECS if s.startswith("open_storage/") and "plain" not in s])
def storage(request: pytest.FixtureRequest) -> Iterator[Any]:
    with StorageSupplier(request.param) as supplied:
        yield supplied


class TestOptunaStorageContractUnderFaults(optuna_suite.TestStorage):
    """Every test of Optuna's suite, on ``open_storage``'s storage under each fault."""
