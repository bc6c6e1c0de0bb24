"""`study.run` (a study, like ``study run``) and `study.train` (one trial, like ``study train``).

Both train in worker processes, as the CLI does, so the calling process (a notebook's kernel)
never imports TensorFlow; both check every argument before anything is recorded and name the
argument in their errors.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from study.api.arguments import (
    in_arguments,
    one_of,
    positive_int,
    problem_in_arguments,
    text,
)
from study.errors import FieldError, StudyError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from study.api.studies import Study
    from study.config.study import StudyConfig
    from study.config.trial import TrialSpec
    from study.results import TrialResult

#: The exit statuses of a run stopped by Ctrl-C (the kernel's interrupt) or SIGTERM.
_INTERRUPTED = (130, 143)


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
    workload: str = "mnist1d",
    *,
    batch_size: int = 128,
    learning_rate: float = 0.05,
    model: str | None = None,
    workload_options: Mapping[str, Any] | None = None,
    strategy: str = "auto",
    target: str | None = None,
    target_hold: str = "5%,5",
    optimizer: str = "nesterov",
    momentum: float = 0.9,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-7,
    weight_decay: float = 0.0,
    schedule: str = "constant",
    warmup_steps: int = 0,
    decay_steps: int | None = None,
    end_factor: float = 0.0,
    max_steps: int | None = None,
    max_examples: int | None = None,
    max_seconds: float | None = None,
    eval_every: str | int = "geometric:1.05",
    seed: int = 0,
    loss: str | None = None,
    precision: str = "auto",
    jit_compile: str = "auto",
    noise_scale: bool = False,
    batch_schedule: Any = None,
    lr_alpha: float | None = None,
    stage_warmup_steps: int | None = None,
    track: bool = True,
    tracking_uri: str | None = None,
    experiment: str = "study-train",
) -> TrialResult:
    """Train one trial until its target holds or its budget runs out, as ``study train`` does
    (the same defaults; no budget given means 10,000 steps), and return its `TrialResult`
    (``result.frame()`` is its measurement curve).

    ``workload`` is a built-in workload or ``module:callable``; ``target`` defaults to the
    workload's. With ``track`` the trial is logged to MLflow (experiment ``experiment``).
    ``batch_schedule`` grows the global batch by examples seen (``batch_size`` is then the
    first stage's): a `study.config.schedule.BatchSchedule`, its study-file section as a
    mapping, a YAML file holding one, or inline stages such as ``"32,128@40960"`` trained at
    ``learning_rate`` at the first batch size, scaled as ``(B / B0) ** lr_alpha`` (default
    0.5), with ``warmup_steps``, and ``stage_warmup_steps`` ramping the rate over a later
    stage's first steps (`study.config.schedule`).

    Raises:
        UsageError: a bad argument, named (``learning_rate must be > 0 (got -1.0)``), or bad
            data found by the worker (``workload_options['path']: cannot read ...``).
    """
    from study.deps import require_tensorflow
    from study.runner.single import Tracking, train_one

    try:
        spec = _trial_spec(locals())
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


def _trial_spec(a: Mapping[str, Any]) -> TrialSpec:
    """The trial spec of `train`'s arguments (``a``: its locals), every value checked."""
    from study.config.trial import Budget, EvalCadence, OptimizerSpec, ScheduleSpec, TrialSettings
    from study.runner.single import single_spec

    options = a["workload_options"] or {}
    if not isinstance(options, Mapping):
        raise FieldError("workload_options", "must be a mapping of option names to values", options)
    no_budget = all(a[k] is None for k in ("max_steps", "max_examples", "max_seconds"))
    plan = _batch_schedule(a)
    return single_spec(
        text("workload", a["workload"]) or "",
        options,
        model=a["model"],
        batch_size=plan.first_batch_size if plan is not None else a["batch_size"],
        optimizer=OptimizerSpec(
            name=a["optimizer"],
            learning_rate=a["learning_rate"],
            momentum=a["momentum"],
            beta1=a["beta1"],
            beta2=a["beta2"],
            epsilon=a["epsilon"],
            weight_decay=a["weight_decay"],
        ),
        schedule=ScheduleSpec(
            name=a["schedule"],
            warmup_steps=a["warmup_steps"],
            decay_steps=a["decay_steps"],
            end_factor=a["end_factor"],
        ),
        target=a["target"],
        hold=a["target_hold"],
        strategy=a["strategy"],
        settings=TrialSettings(
            budget=Budget(
                max_steps=10_000 if no_budget else a["max_steps"],
                max_examples=a["max_examples"],
                max_seconds=a["max_seconds"],
            ),
            cadence=EvalCadence.parse(a["eval_every"], option="eval_every"),
            seed=a["seed"],
            loss=a["loss"],
            precision=a["precision"],
            jit_compile=a["jit_compile"],
            noise_scale=bool(a["noise_scale"]),
        ),
        batch_schedule=plan,
    )


def _batch_schedule(a: Mapping[str, Any]) -> Any:
    """`train`'s ``batch_schedule`` (with ``learning_rate``, ``lr_alpha``, ``warmup_steps``
    for inline stages) as a `BatchSchedule`, or None; its errors named by argument."""
    from study.config.schedule import load_schedule

    if a["batch_schedule"] is None:
        if a["lr_alpha"] is not None:
            raise UsageError("lr_alpha needs batch_schedule (it scales its learning rate)")
        if a["stage_warmup_steps"] is not None:
            raise UsageError("stage_warmup_steps needs batch_schedule (it ramps its stages)")
        return None
    try:
        return load_schedule(
            a["batch_schedule"],
            learning_rate=a["learning_rate"],
            alpha=a["lr_alpha"],
            warmup_steps=a["warmup_steps"],
            stage_warmup_steps=a["stage_warmup_steps"] or 0,
        )
    except FieldError as err:
        names = {"lr_scaling.alpha": "lr_alpha"}
        if err.field in ("learning_rate", "warmup_steps", "stage_warmup_steps"):
            raise
        name = names.get(err.field, f"batch_schedule.{err.field}")
        raise FieldError(name, err.rule, err.value) from None


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
