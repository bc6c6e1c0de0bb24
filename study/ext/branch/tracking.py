"""MLflow for branch trials: the reference run, its checkpoints as artifacts, a nested run per
branch, and CBS(t) as the reference run's metrics.

The reference run lives in the study's experiment (nested under the study's parent run when
there is one, tag ``study.role = branch_reference``). Its checkpoints are artifacts
``checkpoints/ckpt-I.npz`` of that run: in the artifact store the tracking server serves, so a
worker on another host loads a checkpoint through the server (`load_checkpoint`), with no
shared disk. Each branch is a run nested under the reference (``mlflow.parentRunId``) with its
checkpoint, batch size, learning rate and replicate as params and its end as metrics.
CBS(t) and B_simple(t) go to the reference run as metrics against examples seen
(``step`` = examples), and the whole table as ``cbs.json``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param

from study.errors import UsageError
from study.tracking.mlflow_logger import MlflowLogger
from study.tracking.parents import parent_runs

__all__ = ["REFERENCE_ROLE", "BranchTracker"]

REFERENCE_ROLE = "branch_reference"
BRANCH_ROLE = "branch"
PARENT_TAG = "mlflow.parentRunId"


class BranchTracker:
    """The branch trials of one study in one MLflow tracking store."""

    def __init__(self, uri: str, study: str) -> None:
        self.uri = uri
        self.study = study
        self.logger = MlflowLogger(uri)
        self.client = self.logger.client
        self.experiment_id = self.logger.experiment_id(study)

    def start_reference(self, params: Mapping[str, Any]) -> str:
        """A new reference run (nested under the study's parent run if any); its id."""
        tags = {"study.role": REFERENCE_ROLE, "study.name": self.study}
        parents = parent_runs(self.client, self.experiment_id)
        if parents:
            tags[PARENT_TAG] = parents[0].info.run_id
        run = self.client.create_run(
            self.experiment_id, run_name=f"reference b{params.get('batch_size')}", tags=tags
        )
        run_id = run.info.run_id
        self.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
        return run_id

    def store_checkpoint(self, run_id: str, index: int, blob: bytes) -> str:
        """Upload a checkpoint as an artifact of the reference run; its artifact path."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"ckpt-{index}.npz"
            path.write_bytes(blob)
            self.client.log_artifact(run_id, str(path), "checkpoints")
        return f"checkpoints/ckpt-{index}.npz"

    def load_checkpoint(self, run_id: str, artifact: str) -> bytes:
        """A checkpoint's bytes from the artifact store.

        Raises:
            UsageError: it is not there (one line naming the run and the artifact).
        """
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        with tempfile.TemporaryDirectory() as tmp:
            try:
                local = self.client.download_artifacts(run_id, artifact, tmp)
                return Path(local).read_bytes()
            except Exception as exc:  # MlflowException, OSError: missing or unreadable
                first = (str(exc).strip().splitlines() or [""])[0]
                raise UsageError(
                    f"checkpoint {artifact!r} of reference run {run_id} is missing from the "
                    f"artifact store at {self.uri} ({first}); run `study branch` again with "
                    "--restart to make a new reference run"
                ) from None

    def log_reference(self, run_id: str, rows: Sequence[Mapping[str, Any]], status: str) -> None:
        """The reference's curve (rows with ``examples``) as metrics; end the run."""
        metrics = []
        for row in rows:
            step = int(row["examples"])
            for key, value in row.items():
                if key in ("examples", "step") or not _finite(value):
                    continue
                metrics.append(Metric(f"reference/{key}", float(value), 0, step))
        _log_metrics(self, run_id, metrics)
        self.client.set_terminated(run_id, status)

    def log_branch(
        self, reference_run: str, task: Mapping[str, Any], outcome: Mapping[str, Any]
    ) -> str:
        """A branch as a run nested under the reference run; its id."""
        name = f"ckpt {task['checkpoint']} b{task['batch_size']} lr {task['learning_rate']:.3g}"
        tags = {PARENT_TAG: reference_run, "study.role": BRANCH_ROLE, "study.name": self.study}
        run = self.client.create_run(self.experiment_id, run_name=name, tags=tags)
        run_id = run.info.run_id
        params = [Param(k, str(v)) for k, v in task.items() if k != "artifact"]
        metrics = [
            Metric(k, float(v), 0, 0)
            for k, v in outcome.items()
            if isinstance(v, (int, float)) and _finite(v)
        ]
        self.client.log_batch(run_id, metrics=metrics, params=params)
        status = "FAILED" if outcome.get("error") else "FINISHED"
        self.client.set_terminated(run_id, status)
        return run_id

    def log_cbs(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """CBS(t) (with its interval) and B_simple(t) on the reference run, ``step`` = examples,
        and the table as the artifact ``cbs.json``."""
        metrics = []
        for row in rows:
            step = int(row["examples"])
            for key in ("cbs", "cbs_low", "cbs_high", "b_simple"):
                value = row.get(key)
                if _finite(value):
                    metrics.append(Metric(f"cbs/{key}", float(value), 0, step))
        _log_metrics(self, run_id, metrics)
        self.client.set_tag(run_id, "study.cbs", "measured")
        self.client.log_text(run_id, json.dumps(list(rows), default=str, indent=1), "cbs.json")

    def reference_runs(self) -> list[Any]:
        return self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.`study.role` = '{REFERENCE_ROLE}'"
        )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _log_metrics(tracker: BranchTracker, run_id: str, metrics: list[Metric]) -> None:
    for start in range(0, len(metrics), 900):
        tracker.client.log_batch(run_id, metrics=metrics[start : start + 900])
