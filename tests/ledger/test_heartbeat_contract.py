"""Optuna's own heartbeat suite (`tests/ledger/optuna_suite/heartbeat.py`, Optuna 5.1.0) on the
storages `study` builds on a database that keep Optuna's heartbeat: the RDB storage uncached and
cached, retried around each (`RetryingStorage` is an Optuna heartbeat storage when the storage
it wraps is), plain and with a fault injected on every write (`tests/ledger/contract.py`).
Optuna's suite runs its heartbeat tests on its SQLite storages only, not on its proxy: neither
does this one (the proxy keeps no Optuna heartbeat; `study` keeps its own,
`study.ledger.liveness`)."""

from __future__ import annotations

import pytest

from tests.ledger.contract import every_fault_fired  # noqa: F401
from tests.ledger.optuna_suite.heartbeat import (  # noqa: F401  (collected from here)
    test_fail_stale_trials,
    test_fail_stale_trials_with_optimize,
    test_fail_stale_trials_with_race_condition,
    test_get_stale_trial_ids,
    test_heartbeat_experimental_warnings,
    test_heartbeat_stale_trial_callback,
    test_invalid_heartbeat_interval_and_grace_period,
    test_repeatedly_called_record_heartbeat,
    test_retry_heartbeat_stale_trial_callback,
    test_retry_heartbeat_stale_trial_callback_intermediate,
    test_retry_heartbeat_stale_trial_callback_repetitive_failure,
)

#: Optuna marks its heartbeat experimental: a warning on every storage made with one.
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
