"""What the outage tests share (test_storage_outage.py, test_tracking_outage.py and the chaos
driver `tests.chaos`): a study whose trials last long enough for a service to go away under
them, and how many of its trials finished so far, read while a service may be down."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.runner.conftest import Store, counted, tiny_study


def lasting_study(name: str, per_stratum: int) -> dict[str, Any]:
    """`tiny_study` with trials of a few seconds each: a target out of reach and no pruning,
    so every trial trains its 6,000 steps (evaluated every 1,000) and the study outlasts a
    worker's start, an outage and a restart."""
    return tiny_study(
        name=name,
        trials_per_stratum=per_stratum,
        target="val_accuracy>=0.999",
        budget={"max_steps": 6000},
        eval_every=1000,
        tuner={"pruning": False},
    )


def finished(store: Store, data: Mapping[str, Any], fresh: bool = False) -> int:
    """Trials of the study ``data`` that finished so far: 0 before its ledger exists or while
    its storage does not answer. ``fresh``: read the ledger afresh (a journal file another
    process appends to); without it, one storage is polled (no connection per poll)."""
    if not store.started():
        return 0
    try:
        return sum(len(counted(t)) for t in store.trials(data, fresh=fresh).values())
    except Exception:
        return 0
