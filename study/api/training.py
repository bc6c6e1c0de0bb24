"""`study.run` (a study, like ``study run``) and `study.train` (one trial, like ``study train``).

Both train in worker processes, as the CLI does, so the calling process (a notebook's kernel)
never imports TensorFlow; both check every argument before anything is recorded and name the
argument in their errors.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from study.api.arguments import (
    argument_of,
    in_arguments,
    one_of,
    positive_int,
    problem_in_arguments,
    text,
)
from study.config.definition import TrialDefinition
from study.errors import ExitCode, FieldError, StudyError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from study.api.studies import Study
    from study.config.study import StudyConfig
    from study.results import TrialResult

#: The exit statuses of a run stopped by Ctrl-C (the kernel's interrupt) or SIGTERM.
_INTERRUPTED = (ExitCode.INTERRUPTED, ExitCode.TERMINATED)


def run(
    path_or_config: str | os.PathLike[str] | StudyConfig | Mapping[str, Any],
    *,
    storage: str | os.PathLike[str] | None = None,
    tracking_uri: str | None = None,
    workers: int = 1,
    tuner: str = "both",
    trials: int | None = None,
    storage_retry: float | None = None,
) -> Study:
    """Run (or continue) a study, as ``study run FILE`` does, and return it (`Study`).

    Args:
        path_or_config: a study file's path, a parsed study file (a mapping, as YAML gives
            it) or a `StudyConfig`. A study of that name in ``storage`` continues where it
            stopped.
        storage: the ledger: an Optuna storage URL or a journal file (default
            ``mlruns/optuna.journal``, or under ``$STUDY_HOME``).
        tracking_uri: the MLflow tracking store (default ``MLFLOW_TRACKING_URI``, else
            ``mlruns/mlflow.db``).
        workers: training processes on this host.
        tuner: ``optuna``, ``keras-tuner`` or ``both`` (they take turns over one ledger).
        trials: the study's trial budget instead of the study file's.
        storage_retry: seconds to wait for a database storage that stops answering (a
            restart, a failover) before raising `StorageUnavailable` (default: the study
            file's ``storage_retry``, else ``$STUDY_STORAGE_RETRY``, else 300).

    Raises:
        UsageError: a bad argument (named) or study file (its file and key).
        KeyboardInterrupt: the run was interrupted (the kernel's stop button, Ctrl-C,
            SIGTERM); its finished trials are kept and the same call continues it.
        StudyError: the run stopped on its own (e.g. too many consecutive failed trials).
        StorageUnavailable: the storage stayed away past ``storage_retry`` (a `StudyError`).
    """
    from study.api.studies import load
    from study.runner.launch import RunOptions, run_study
    from study.tuners.registry import TUNERS

    options = RunOptions(
        tuner=one_of("tuner", tuner, TUNERS),
        trials=positive_int("trials", trials, optional=True),
        workers=positive_int("workers", workers) or 1,
        storage=text("storage", storage, optional=True),
        tracking_uri=text("tracking_uri", tracking_uri, optional=True),
        storage_retry=_seconds("storage_retry", storage_retry),
    )
    config = study_config(path_or_config)
    _check_tracking(options.tracking_uri)
    status = _interruptible(lambda: run_study(config, options))
    if status in _INTERRUPTED:
        raise KeyboardInterrupt(
            f"study {config.name!r} was interrupted; its finished trials are kept, and "
            "study.run with the same study continues it"
        )
    if status != 0:
        raise StudyError(
            f"study {config.name!r} stopped (exit status {status}; the message above says why); "
            "its finished trials are kept, and study.run continues it"
        )
    return load(config.name, storage=options.storage, tracking_uri=options.tracking_uri)


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e12:
        raise FieldError(name, "must be a number of seconds >= 0", value)
    return float(value)


def study_config(value: Any) -> StudyConfig:
    """The `StudyConfig` of a study file's path, a parsed study file or a config, checked as
    ``study run`` checks it (workload, options, model, loss and target).

    Raises:
        UsageError: the file or mapping breaks a rule (named by file and key); a value of
            another type is a `FieldError` on ``path_or_config``.
    """
    from study.config.study import StudyConfig
    from study.config.studyfile import in_file, load_study_file, parse_study
    from study.workloads.resolve import check_study

    if isinstance(value, StudyConfig):
        config = value
    elif isinstance(value, Mapping):
        import yaml

        config = parse_study(dict(value), "<study mapping>", text=yaml.safe_dump(dict(value)))
    elif isinstance(value, (str, os.PathLike)):
        return load_study_file(os.fspath(value), check=check_study)
    else:
        raise FieldError(
            "path_or_config",
            "must be a study file's path, a mapping (a parsed study file) or a StudyConfig",
            value,
        )
    try:
        check_study(config)
    except UsageError as exc:
        raise in_file(exc, str(config.source)) from None
    return config


def train(
    trial: str | TrialDefinition | None = None,
    /,
    *,
    track: bool = True,
    tracking_uri: str | None = None,
    experiment: str = "study-train",
    **fields: Any,
) -> TrialResult:
    """Train one trial until its target holds or its budget runs out, as ``study train`` does
    (the same fields and defaults), and return its `TrialResult` (``result.frame()`` is its
    measurement curve).

    ``trial`` is the workload (a built-in name or ``module:callable``; default ``mnist1d``) or
    a whole `study.config.definition.TrialDefinition`; ``fields`` are the fields of
    `TrialDefinition` (``batch_size``, ``learning_rate``, ``model``, ``workload_options``,
    ``target``, ``max_steps``, ``eval_every``, ``noise_scale``, ``batch_schedule``, ...; the
    flags of ``study train`` by their field names), each checked against it. With ``track``
    the trial is logged to MLflow (experiment ``experiment``, at ``tracking_uri``).

    Example: ``study.train("tabular", batch_size=64, learning_rate=0.1, max_steps=500)``.

    Raises:
        UsageError: a bad argument, named (``learning_rate must be > 0 (got -1.0)``,
            ``lerning_rate: not a field of a trial (did you mean learning_rate?)``), or bad
            data found by the worker (``workload_options['path']: cannot read ...``).
    """
    from study.deps import require_tensorflow
    from study.runner.single import Tracking, resolve_trial, train_one

    try:
        spec = trial_definition(trial, fields).spec(resolve_trial, called=argument_of)
    except UsageError as exc:
        raise in_arguments(exc) from None
    require_tensorflow()
    tracking = (
        Tracking(experiment, text("tracking_uri", tracking_uri, optional=True), "tracking_uri")
        if track
        else None
    )
    name = f"{spec.workload}-b{spec.batch_size}-lr{spec.learning_rate:g}"
    if spec.batch_schedule is not None:
        from study.config.schedule import format_stages

        name = f"{spec.workload}-schedule-{format_stages(spec.batch_schedule.stages)}"
    result, run_id, logger = train_one(spec, name, tracking, named=problem_in_arguments)
    if logger is not None and run_id:
        logger.log_trial(run_id, spec, result)
    return result


def trial_definition(trial: Any, changes: Mapping[str, Any]) -> TrialDefinition:
    """`train`'s trial: ``trial`` (a workload's name or a `TrialDefinition`, None: the
    default) with ``changes`` to its fields, each a field's name.

    Raises:
        FieldError: ``trial`` of another type, a name that is no field, or the workload given
            twice.
    """
    if isinstance(trial, TrialDefinition):
        base = trial
    elif trial is None or isinstance(trial, str):
        if trial is not None and "workload" in changes:
            raise FieldError(
                "workload", detail=f"given twice ({trial!r} and {changes['workload']!r})"
            )
        base = TrialDefinition() if trial is None else TrialDefinition(workload=trial)
    else:
        raise FieldError("trial", "must be a workload's name or a TrialDefinition", trial)
    return base.changed(**changes)


def _signature() -> inspect.Signature:
    """`train`'s signature with the fields of `TrialDefinition` as its keywords, for
    ``help(study.train)`` and notebooks' completions."""
    own = inspect.signature(train)
    standard = TrialDefinition()
    keywords = [
        inspect.Parameter(
            item.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=getattr(standard, item.name),
            annotation=item.type,
        )
        for item in dataclasses.fields(TrialDefinition)
    ]
    kept = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    return own.replace(parameters=[*kept, *keywords])


train.__signature__ = _signature()  # type: ignore[attr-defined]


def _check_tracking(uri_option: str | None) -> None:
    """A dead tracking server fails at once, named as the argument (or the variable)."""
    from study.paths import tracking_uri
    from study.tracking.server import check_answers

    check_answers(tracking_uri(uri_option), "tracking_uri" if uri_option else "MLFLOW_TRACKING_URI")


def _interruptible(call: Any) -> int:
    """``call()`` with SIGTERM stopping it as Ctrl-C does, where signals can be handled (the
    main thread); elsewhere as it is."""
    if threading.current_thread() is not threading.main_thread():
        return call()
    from study.runner.stopping import sigterm_interrupts

    with sigterm_interrupts():
        return call()
