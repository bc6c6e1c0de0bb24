"""The study's parent run in MLflow: exactly one, even when processes start it at once.

`ensure_parent_run` finds the parent run or creates one. Two processes that search in the same
moment both find none and both create one; each then keeps the oldest it sees, but the one whose
search ran before the other's run landed sees only its own. `settled_parent` runs a moment later
(before this process logs anything under the parent) and adopts the oldest parent every process
now sees, deleting its own when that is not it.

With several processes starting at once, one may adopt another's run (the oldest it sees) just
before that process, settling, deletes it for an older one: `ensure_parent_run` then finds the
run it adopted deleted and takes the oldest left; and `settled_parent` moves a process that
adopted a run not the oldest to the oldest too (deleting only a run the process created).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from study.tracking.descriptions import NOTE, with_question

if TYPE_CHECKING:  # pragma: no cover
    from study.tracking.mlflow_logger import MlflowLogger

__all__ = ["PARENT_ROLE", "ParentRun", "ensure_parent_run", "parent_runs", "settled_parent"]

PARENT_ROLE = "parent"
#: How many times `ensure_parent_run` looks again for a parent run deleted under it.
ATTEMPTS = 5


@dataclass(frozen=True)
class ParentRun:
    """The study's parent run as `ensure_parent_run` left it: its id, whether this process
    created it, and the (name, digest) of each dataset it has as an input."""

    run_id: str
    created: bool
    datasets: frozenset[tuple[str, str]]


def ensure_parent_run(
    logger: MlflowLogger,
    experiment_id: str,
    study: str,
    params: Mapping[str, Any],
    artifacts: Mapping[str, str],
    note: str | None,
) -> ParentRun:
    """Find the study's parent run (the oldest) or create it, and set it RUNNING.

    A created run gets ``params``, ``artifacts`` (path: text) and ``note`` as its description;
    a found one gets ``note``'s question in its description, its answer kept. A found run that
    a racing process deletes before it is set RUNNING is given up for the oldest left.
    """
    client = logger.client

    def attempt() -> ParentRun | None:  # None: the run found was deleted under it
        existing, created = parent_runs(client, experiment_id), False
        if not existing:
            tags = {"study.role": PARENT_ROLE, "study.name": study}
            run_id = logger.start_run(
                experiment_id, study, tags={**tags, **({NOTE: note} if note else {})}
            )
            existing = parent_runs(client, experiment_id)
            keep = existing[0].info.run_id if existing else run_id
            if keep != run_id:
                client.delete_run(run_id)
            else:
                created = True
                logger.log_params(run_id, params)
                for path, text in artifacts.items():
                    client.log_text(run_id, text, path)
        run = existing[0] if existing else None
        run_id = run.info.run_id if run else run_id
        datasets: frozenset[tuple[str, str]] = frozenset()
        try:
            if run is not None:
                inputs = run.inputs.dataset_inputs if run.inputs else []
                datasets = frozenset((i.dataset.name, i.dataset.digest) for i in inputs)
                old = run.data.tags.get(NOTE)
                if note and with_question(old, note) != old:
                    client.set_tag(run_id, NOTE, with_question(old, note))
            client.update_run(run_id, status="RUNNING")
        except MlflowException:
            if created or not _deleted(client, run_id):
                raise
            return None
        return ParentRun(run_id, created, datasets)

    for _ in range(ATTEMPTS):
        parent = attempt()
        if parent is not None:
            return parent
    raise MlflowException(
        f"the parent run of study {study!r} was deleted {ATTEMPTS} times while this process "
        "adopted it; start the run again"
    )


def _deleted(client: MlflowClient, run_id: str) -> bool:
    """Whether run ``run_id`` is deleted (or gone)."""
    try:
        return client.get_run(run_id).info.lifecycle_stage == "deleted"
    except MlflowException:
        return True


def parent_runs(client: MlflowClient, experiment_id: str) -> list[Any]:
    """The parent runs of a study's experiment, oldest first (normally exactly one)."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.`study.role` = '{PARENT_ROLE}'", max_results=50
    )
    return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))


def settled_parent(client: MlflowClient, experiment_id: str, chosen: str, created: bool) -> str:
    """The study's parent run once every racing process's run has landed: the oldest. The run
    this process ``chosen`` is deleted when another is older and this process ``created`` it
    (its creator deletes a run it only adopted)."""
    runs = parent_runs(client, experiment_id)
    oldest = str(runs[0].info.run_id) if runs else chosen
    if oldest != chosen:
        if created:
            client.delete_run(chosen)
        client.update_run(oldest, status="RUNNING")
    return oldest
