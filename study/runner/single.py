"""One trial outside a study (``study train``, ``study.train``): checked, then trained in a
worker process, and logged to an MLflow run of its own. Its spec is built by
`study.config.definition.TrialDefinition.spec`, with `resolve_trial` resolving the workload.

The data and model are checked before anything is recorded: a target the user's compiled model
does not report, a bad file or label is a `UsageError` whose message starts with the field
(``workload_options.path: cannot read 'x.csv': ...``), and so is a bad loss found while
training starts (its MLflow run is deleted). Each front end names the field its own way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from study.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    from study.config.target import Target
    from study.config.trial import TrialSpec
    from study.results import TrialResult


@dataclass(frozen=True)
class Tracking:
    """Where a single trial is logged: ``experiment`` on the store at ``uri`` (None: the
    default, `study.paths.tracking_uri`); ``called`` is what messages call the URI option
    (``--tracking-uri``, ``tracking_uri``)."""

    experiment: str
    uri: str | None = None
    called: str = "--tracking-uri"


def resolve_trial(
    workload: str,
    options: Mapping[str, Any],
    *,
    model: str | None,
    loss: str | None,
    target: str | None,
) -> tuple[str, Target]:
    """The `study.config.definition.WorkloadCheck` of one trial outside a study: the workload
    resolved with its options, model and loss, its data checked (no TensorFlow), and ``target``
    (None: the task's default) checked against its task; returns the model's name and the
    target.

    Raises:
        FieldError: on ``workload``, ``workload_options[.<option>]``, ``model``, ``loss`` or
            ``target``, which each front end names its own way.
    """
    from study.config.target import Target
    from study.workloads.resolve import resolve_workload

    resolved = resolve_workload(workload, dict(options), model=model, loss=loss, validate=True)
    goal = Target.parse(target or resolved.task.default_target)
    resolved.task.check_target(
        goal, workload=resolved.workload.name, open_metrics=":" in resolved.model
    )
    return resolved.model, goal


def train_one(
    spec: TrialSpec,
    run_name: str,
    tracking: Tracking | None,
    *,
    named: Callable[[str], str] = lambda problem: problem,
) -> tuple[TrialResult, str | None, Any]:
    """Check ``spec`` in a worker, then train it there, with an MLflow run named ``run_name``
    unless ``tracking`` is None; returns the result, the run id and the `MlflowLogger` (None,
    None untracked). The caller logs the result into the run (``logger.log_trial``).

    Raises:
        UsageError: bad input found by the worker, its message passed through ``named``.
    """
    from study.runner.pool import WorkerPool

    with WorkerPool(1) as pool:
        problem = pool.check(spec)
        if problem is not None:
            raise UsageError(named(problem))
        logger = run_id = None
        if tracking is not None:
            from study.paths import tracking_uri
            from study.tracking.mlflow_logger import MlflowLogger
            from study.tracking.server import check_answers

            uri = tracking_uri(tracking.uri)
            check_answers(uri, tracking.called if tracking.uri else "MLFLOW_TRACKING_URI")
            logger = MlflowLogger(uri)
            run_id = logger.start_run(logger.experiment_id(tracking.experiment), run_name)
        try:
            result = pool.run(spec)
        except BaseException:
            if logger and run_id:
                logger.client.set_terminated(run_id, status="KILLED")
            raise
    if result.usage_error is not None:
        if logger and run_id:
            logger.client.delete_run(run_id)
        raise UsageError(named(result.usage_error))
    return result, run_id, logger
