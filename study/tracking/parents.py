"""The study's parent run in MLflow: exactly one, even when processes start it at once.

`StudyTracker.ensure_parent` finds the parent run or creates one. Two processes that search in
the same moment both find none and both create one; each then keeps the oldest it sees, but the
one whose search ran before the other's run landed sees only its own. `settled_parent` runs a
moment later (before this process logs anything under the parent) and adopts the oldest parent
every process now sees, deleting its own when that is not it.
"""

from __future__ import annotations

from typing import Any

from mlflow.tracking import MlflowClient

__all__ = ["PARENT_ROLE", "parent_runs", "settled_parent"]

PARENT_ROLE = "parent"


def parent_runs(client: MlflowClient, experiment_id: str) -> list[Any]:
    """The parent runs of a study's experiment, oldest first (normally exactly one)."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`study.role` = '{PARENT_ROLE}'", max_results=50
    )
    return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))


def settled_parent(client: MlflowClient, experiment_id: str, mine: str) -> str:
    """The study's parent run once every racing process's run has landed: the oldest, and
    ``mine`` (the one this process created and kept) deleted when another is older."""
    runs = parent_runs(client, experiment_id)
    oldest = str(runs[0].info.run_id) if runs else mine
    if oldest != mine:
        client.delete_run(mine)
        client.update_run(oldest, status="RUNNING")
    return oldest
