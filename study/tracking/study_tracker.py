"""MLflow for a whole study: one experiment, a parent run, a nested run per trial.

All MLflow calls run on one background thread in submission order, so training never waits for
the tracking store; `flush` waits for them. MLflow is a mirror of the ledger: `sync` repairs it
after a crash (runs left RUNNING are closed, finished trials that never reached MLflow are
logged from the ledger).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mlflow.entities import RunTag

from study.config.trial import TrialSpec
from study.results import Measurement, TrialResult, TrialState
from study.tracking.mlflow_logger import MlflowLogger

PARENT_ROLE = "parent"
TRIAL_ROLE = "trial"


class StudyTracker:
    """Asynchronous, batched MLflow logging for one study."""

    def __init__(self, uri: str, study: str) -> None:
        self.logger = MlflowLogger(uri)
        self.study = study
        self.experiment_id = self.logger.experiment_id(study)
        self.parent_run_id: str | None = None
        self.busy_seconds = 0.0
        self.cpu_seconds = 0.0
        self.errors: list[str] = []
        self._runs: dict[str, str] = {}
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="mlflow-tracker", daemon=True)
        self._thread.start()

    # -- the background thread ------------------------------------------------------------
    def _loop(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # Linux: lower this thread's priority
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            job = self._queue.get()
            if job is None:
                self._queue.task_done()
                return
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                job()
            except Exception as exc:
                message = f"MLflow logging failed: {type(exc).__name__}: {exc}"
                if message not in self.errors:
                    self.errors.append(message)
                    print(f"study: warning: {message}", file=sys.stderr)
            finally:
                self.busy_seconds += time.perf_counter() - start
                self.cpu_seconds += time.thread_time() - cpu
                self._queue.task_done()

    def submit(self, job: Callable[[], None]) -> None:
        self._queue.put(job)

    def flush(self) -> None:
        self._queue.join()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(timeout=30)

    # -- the parent run -------------------------------------------------------------------
    def ensure_parent(self, params: Mapping[str, Any], artifacts: Mapping[str, str]) -> str:
        """Find or create the study's parent run (exactly one, even with racing processes)."""
        client = self.logger.client
        existing = self._parents()
        if not existing:
            run_id = self.logger.start_run(
                self.experiment_id,
                self.study,
                tags={"study.role": PARENT_ROLE, "study.name": self.study},
            )
            existing = self._parents()
            keep = existing[0].info.run_id if existing else run_id
            if keep != run_id:
                client.delete_run(run_id)
            else:
                self.logger.log_params(run_id, params)
                for path, text in artifacts.items():
                    client.log_text(run_id, text, path)
        run_id = existing[0].info.run_id if existing else run_id
        client.update_run(run_id, status="RUNNING")
        self.parent_run_id = run_id
        return run_id

    def _parents(self) -> list[Any]:
        runs = self.logger.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.`study.role` = '{PARENT_ROLE}'",
            max_results=50,
        )
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

    def end_parent(self, status: str, summary: Mapping[str, float] | None = None) -> None:
        run_id = self.parent_run_id
        if not run_id:
            return

        def job() -> None:
            if summary:
                from mlflow.entities import Metric

                now = int(time.time() * 1000)
                self.logger.log_metrics(
                    run_id, [Metric(k, float(v), now, 0) for k, v in summary.items()]
                )
            self.logger.client.set_terminated(run_id, status=status)

        self.submit(job)

    # -- trial runs -----------------------------------------------------------------------
    def start_trial(self, key: str, name: str, tags: Mapping[str, str]) -> None:
        """Open a nested run for a trial (status RUNNING) in the background."""

        def job() -> None:
            all_tags = {"study.role": TRIAL_ROLE, "study.trial": key, "status": "running", **tags}
            self._runs[key] = self.logger.start_run(
                self.experiment_id, name, parent_run_id=self.parent_run_id, tags=all_tags
            )

        self.submit(job)

    def finish_trial(
        self,
        key: str,
        spec: TrialSpec,
        result: TrialResult,
        params: Mapping[str, Any],
        tags: Mapping[str, str],
        run_id: str | None = None,
    ) -> None:
        """Log a finished trial (params, curve, summary, status) and close its run.

        The run is the one `start_trial` opened, else ``run_id`` (a run left open by a process
        that died), else a new one.
        """

        def job() -> None:
            target = self._runs.pop(key, None) or run_id
            if target is None:
                target = self.logger.start_run(
                    self.experiment_id,
                    tags.get("mlflow.runName", key),
                    parent_run_id=self.parent_run_id,
                    tags={"study.role": TRIAL_ROLE, "study.trial": key},
                )
            self.logger.log_trial(target, spec, result, extra_params=params, tags=tags)

        self.submit(job)

    def trial_runs(self) -> dict[str, Any]:
        """Nested trial runs of this study by trial key (the newest per key)."""
        client = self.logger.client
        out: dict[str, Any] = {}
        token = None
        while True:
            page = client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`study.role` = '{TRIAL_ROLE}'",
                max_results=1000,
                page_token=token,
            )
            for run in page:
                key = run.data.tags.get("study.trial")
                if key and (key not in out or run.info.start_time > out[key].info.start_time):
                    out[key] = run
            token = page.token
            if not token:
                return out

    def mark_interrupted(self, run_id: str) -> None:
        self.logger.client.log_batch(run_id, tags=[RunTag("status", "interrupted")])
        self.logger.client.set_terminated(run_id, status="FAILED")


def result_from_ledger(attrs: Mapping[str, Any]) -> TrialResult:
    """Rebuild a `TrialResult` from a ledger trial's user attributes (for `StudyTracker` repair)."""
    curve = []
    for row in json.loads(attrs.get("curve") or "[]"):
        metrics = {
            k: (v if v is not None else float("nan"))
            for k, v in row.items()
            if k not in ("step", "examples", "train_seconds", "train_loss")
        }
        curve.append(
            Measurement(
                step=int(row["step"]),
                examples=int(row["examples"]),
                train_seconds=float(row["train_seconds"]),
                train_loss=float("nan")
                if row.get("train_loss") is None
                else float(row["train_loss"]),
                metrics=metrics,
            )
        )
    return TrialResult(
        state=TrialState(attrs.get("status", "failed")),
        steps_run=int(attrs.get("steps_run") or 0),
        examples_run=int(attrs.get("examples_run") or 0),
        train_seconds=float(attrs.get("train_seconds") or 0.0),
        steps_to_target=attrs.get("steps_to_target"),
        examples_to_target=attrs.get("examples_to_target"),
        seconds_to_target=attrs.get("seconds_to_target"),
        curve=tuple(curve),
        environment=attrs.get("environment") or {},
        error=attrs.get("error"),
    )
