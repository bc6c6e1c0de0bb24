"""Optuna's own storage and heartbeat test suites, vendored from Optuna 5.1.0 (the PyPI
sdist ``optuna-5.1.0.tar.gz``, sha256
``6a4eed79680fdb4f0a70e9a9a59530ae8e9e976db1362e4660de1fdd89434e67``; MIT License, Copyright (c) 2018 Preferred Networks, Inc., see LICENSE here).

- ``pytest_storages.py``: ``optuna/testing/pytest_storages.py`` unchanged (the generic
  ``StorageTestCase``: 46 tests every Optuna storage passes).
- ``storages.py``: ``tests/storages_tests/test_storages.py``: its storage fixture left to the
  runner, its exemptions by storage type applied to the storage inside the retry wrapper.
- ``heartbeat.py``: ``tests/storages_tests/test_heartbeat.py`` over the storages `study` builds,
  its sleeps past the grace period replaced by ageing the heartbeats (`contract.pass_time`).

Not collected by themselves (no ``test_`` prefix): ``tests/ledger/test_storage_contract*.py``
and ``tests/ledger/test_heartbeat_contract.py`` run them (`tests/ledger/contract.py`).
"""
