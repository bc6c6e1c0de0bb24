"""A written report on the study's MLflow parent run (``study report``, ``Study.report(...,
attach=True)``): its files under ``report/``, the answers as ``answer/*`` metrics and the
``study.answer`` tag, and the answer with where the report is in the run's description."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path


def attach_report(
    study: str,
    files: list[Path],
    uri_option: str | None,
    *,
    metrics: Mapping[str, float] | None = None,
    answer: str | None = None,
    who: str = "study report",
    tags: Mapping[str, str] | None = None,
) -> str | None:
    """Log ``files`` (the report just written) to the study's parent run under ``report/``,
    ``metrics`` (`Answers.to_metrics`) at step 0 and ``answer`` (its one line) as the
    ``study.answer`` tag and in the description (`set_answer`), and ``tags`` (e.g. a prediction
    at another target, ``study.prediction``, which says what it assumed).

    Only the written files are logged, not the whole output directory, so ``--out .`` does not
    upload whatever else lies there.

    Returns:
        The run id, or None when there is no MLflow store, experiment or parent run (a study
        imported or run without tracking). Tracking errors are one warning, from ``who``: the
        report is written.
    """
    from study.paths import masked, tracking_store_exists, tracking_uri

    if not tracking_store_exists(uri_option):
        return None  # no local store: do not create one just to find no parent run
    uri = tracking_uri(uri_option)
    try:
        from mlflow.entities import Metric, RunTag
        from mlflow.tracking import MlflowClient

        from study.tracking.parents import parent_runs
        from study.tracking.study_tracker import set_answer

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(study)
        if experiment is None:
            return None
        runs = parent_runs(client, experiment.experiment_id)
        if not runs:
            return None
        run_id = runs[0].info.run_id
        for path in files:
            client.log_artifact(run_id, str(path), "report")
        if answer is not None:
            now = int(time.time() * 1000)
            points = [Metric(k, v, now, 0) for k, v in (metrics or {}).items()]
            client.log_batch(run_id, metrics=points, tags=[RunTag("study.answer", answer)])
        if tags:
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        names = [path.name for path in files]
        shown = "report.html" if "report.html" in names else names[0] if names else None
        where = f"`report/{shown}` in this run's Artifacts tab" if shown else None
        set_answer(client, run_id, answer, where)
        return run_id
    except Exception as exc:
        from study.store_faults import mlflow_fault

        fault = mlflow_fault(exc, uri)  # a local store damaged, or its disk full: what to do
        first = str(exc).splitlines()[0] if str(exc) else ""
        said = str(fault) if fault else f"{type(exc).__name__}: {masked(first, uri)}"
        print(
            f"{who}: warning: could not attach the report to MLflow ({masked(uri)}): {said}",
            file=sys.stderr,
        )
        return None
