"""A stored study read for analysis: its measurement table, study file, target and facts.

`study report`, `study status` and the Python API (`study.Study`) read a study from its ledger
the same way, through these functions; none writes anything. Errors name the data-model field
(``target``) and each front end names it in its own words (``--target``, the ``target``
argument).

Example::

    ledger = Ledger.open("mlruns/optuna.journal", "quickstart", create=False)
    report = stored_report(ledger)                    # the study file's own target
    report = stored_report(ledger, target=Target.parse("val_accuracy>=0.7"))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from study.errors import FieldError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from study.analysis.answers import Answers
    from study.config.study import StudyConfig
    from study.config.target import Target
    from study.ledger import Ledger, StudyRecord
    from study.report.record import ScalingReport, StudyFacts


def stored_table(ledger: Ledger) -> pd.DataFrame:
    """The study's measurement table (flat, one row per evaluation), as `study export` writes
    it."""
    from study.analysis.load import ledger_table

    return ledger_table(ledger.name, ledger.measurement_rows())


def stored_config(record: StudyRecord, name: str) -> StudyConfig | None:
    """The study file stored in the ledger, parsed (None for an imported study), with the
    pruning's slack the study ran with (`StudyRecord.pruned_at`: a default that changed since
    does not rewrite how its trials were stopped)."""
    if not record.config_text:
        return None
    import yaml

    from study.config.studyfile import parse_study

    text = record.config_text
    source = record.config_source or f"<study {name}>"
    config = parse_study(yaml.safe_load(text), source, text=text)
    tuner = dataclasses.replace(config.tuner, prune_slack=record.pruned_at)  # as it ran
    return dataclasses.replace(config, tuner=tuner)


def stored_target(
    record: StudyRecord, config: StudyConfig | None, table: pd.DataFrame, target: Target | None
) -> Target:
    """``target`` if given, else the study file's target, with the study's hold rule.

    Raises:
        FieldError: on ``target``: the study was imported and has no target of its own (the
            message lists the metrics it measured).
    """
    if target is None:
        if config is None:
            from study.report.build import measured_metrics

            metrics = measured_metrics(table)
            example = metrics[0] if metrics else "val/classification_error"
            raise FieldError(
                "target",
                detail=f"study {record.name!r} was imported and has no target of its own; "
                f"give one, e.g. '{example}<0.1' (metrics: {', '.join(metrics) or 'none'})",
            )
        target = config.target
    return dataclasses.replace(target, hold=record.hold_rule)


def stored_report(
    ledger: Ledger,
    *,
    target: Target | None = None,
    accelerators: int | None = None,
    confidence: float = 0.95,
    overhead: float | None = None,
    command: str = "",
    context: Mapping[str, str] | None = None,
    targets: Sequence[float] | Literal["auto"] | None = None,
    predict: float | None = None,
) -> ScalingReport:
    """The scaling report of the study in ``ledger`` for ``target`` (default: its own), at
    ``overhead`` (default: the study file's, else 0.2); with ``targets`` (levels of the
    target's metric, or ``"auto"``) or ``predict`` (a threshold to predict at), the answer
    across targets too (`level_report`).

    Raises:
        StudyNotFound: no study of that name in the storage.
        FieldError: on ``target`` (see `stored_target`); on ``targets`` (see `level_report`).
    """
    from study.report.build import build_report

    summary = ledger.summary()  # StudyNotFound for an unknown study
    record = ledger.require()
    pilot = ledger.notes.pilot()
    table = stored_table(ledger)
    config = stored_config(record, ledger.name)
    goal = stored_target(record, config, table, target)
    report = build_report(
        table,
        goal,
        study=ledger.name,
        accelerators=accelerators,
        confidence=confidence,
        overhead=overhead if overhead is not None else _overhead(config),
        state=summary.state,
        command=command,
        context=context,
        facts=study_facts(ledger, record, config),
        pilot=pilot.to_stored() if pilot is not None else None,
        probe=[row.to_stored() for row in ledger.notes.throughput()],
    )
    from study.extension import report_sections

    return dataclasses.replace(
        report,
        sections={s.key: s.build(ledger, config, report) for s in report_sections()},
        targets=level_report(report, targets, predict),
    )


def level_report(
    report: ScalingReport,
    targets: Sequence[float] | Literal["auto"] | None,
    predict: float | None = None,
) -> Any:
    """The answer across ``targets`` (`target_scaling` on the report's table, accelerators,
    confidence and overhead; ``"auto"`` when only ``predict`` is given), None when neither
    is asked for.

    Raises:
        FieldError: on ``targets``, when the report's metric was never measured.
    """
    if targets is None and predict is None:
        return None
    from study.analysis.target_prediction import AUTO, target_scaling

    answers = report.answers
    if report.target.metric not in report.table.columns:
        raise FieldError(
            "targets",
            detail=f"the trials never measured {report.target.metric}; no levels to refit at",
        )
    try:
        return target_scaling(
            report.table,
            report.target,
            AUTO if targets is None else targets,
            predict=predict,
            accelerators=report.accelerators,
            confidence=report.confidence,
            overhead=answers.overhead,
        )
    except ValueError as exc:
        raise FieldError("targets", detail=str(exc)) from None


def stored_answers(ledger: Ledger) -> Answers | None:
    """The answers of the model of every trial for the study's own target (its hold rule), or
    None for a study without a target of its own (imported, or a study file this installation
    cannot read) or without measurements yet."""
    from study.analysis.answers import study_answers
    from study.analysis.table import flatten_table
    from study.report.build import default_accelerators

    record = ledger.require()
    try:
        config = stored_config(record, ledger.name)
    except UsageError:  # a study file this installation cannot read: no target to answer for
        return None
    if config is None:
        return None
    table = stored_table(ledger)
    flat = flatten_table(table)
    if table.empty or config.target.metric not in flat.columns:
        return None
    return study_answers(
        table,
        dataclasses.replace(config.target, hold=record.hold_rule),
        accelerators=default_accelerators(flat),
        overhead=config.overhead,
    )  # as `stored_report` reads them


def stored_targets(
    ledger: Ledger,
    *,
    target: Target | None = None,
    levels: Sequence[float] | Literal["auto"] = "auto",
    predict: float | None = None,
    accelerators: int | None = None,
    confidence: float = 0.95,
) -> Any:
    """The answer across target levels of the study in ``ledger`` (`target_scaling`), read as
    `stored_report` reads the study (its target and hold rule, overhead, accelerators) without
    the rest of the report.

    Raises:
        StudyNotFound: no study of that name in the storage.
        FieldError: on ``target`` (see `stored_target`) or ``targets`` (no levels to refit at).
    """
    from study.analysis.table import flatten_table
    from study.analysis.target_prediction import target_scaling
    from study.report.build import default_accelerators

    ledger.summary()  # StudyNotFound for an unknown study
    record = ledger.require()
    table = flatten_table(stored_table(ledger))
    config = stored_config(record, ledger.name)
    goal = stored_target(record, config, table, target)
    if goal.metric not in table.columns:
        raise FieldError("targets", detail=f"the trials never measured {goal.metric}")
    try:
        return target_scaling(
            table,
            goal,
            levels,
            predict=predict,
            accelerators=accelerators or default_accelerators(table),
            confidence=confidence,
            overhead=_overhead(config),
        )
    except ValueError as exc:
        raise FieldError("targets", detail=str(exc)) from None


def _overhead(config: StudyConfig | None) -> float:
    """The study file's critical-batch overhead (the default for an imported study)."""
    from study.config.study import DEFAULT_OVERHEAD

    return DEFAULT_OVERHEAD if config is None else config.overhead


def study_facts(ledger: Ledger, record: StudyRecord, config: StudyConfig | None) -> StudyFacts:
    """What the study trained and how it searched, for the top of the report: the study file
    (or an imported study's dataset, model and optimizer), the trials planned, the package
    versions here (`environment_info`, which imports no TensorFlow) and the versions the trials
    recorded."""
    from study.host import environment_info
    from study.report.formatting import display_path, display_storage
    from study.report.record import StudyFacts

    environment = environment_info()
    common: dict[str, Any] = {
        "tuner": record.tuner or "",
        "trials_planned": record.trials_total,
        "packages": {**environment["packages"], "python": environment["python"]},
        "trained_with": _trained_with(ledger),
    }
    if config is None:
        return StudyFacts(
            dataset=record.dataset or "",
            model=record.model or "",
            optimizer=record.optimizer or "",
            imported_from=display_storage(record.source) if record.source else "",
            **common,
        )
    source = record.config_source
    return StudyFacts(
        config=config,
        study_file=display_path(source) if source and not source.startswith("<") else "",
        default_model=_default_model(config),
        **common,
    )


def _default_model(config: StudyConfig) -> str:
    """The model a built-in workload trains when the study file names none ("" if unknown)."""
    from study.workloads import available, get_workload

    if config.model is not None or config.workload not in available():
        return config.model or ""
    try:
        return get_workload(config.workload, config.workload_options).check_model(None)
    except UsageError:  # FieldError included
        return ""


def _trained_with(ledger: Ledger) -> dict[str, str]:
    """The TensorFlow and Keras versions the finished trials recorded, e.g.
    ``{"tensorflow": "2.21.0", "keras": "3.15.1"}`` (several versions joined by " and ")."""
    seen: dict[str, set[str]] = {"tensorflow": set(), "keras": set()}
    for stratum in ledger.strata():
        for trial in ledger.trials(stratum):
            environment = trial.result.environment if trial.result else {}
            for name, versions in seen.items():
                if environment.get(name):
                    versions.add(str(environment[name]))
    return {name: " and ".join(sorted(v)) for name, v in seen.items() if v}
