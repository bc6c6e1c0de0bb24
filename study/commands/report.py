"""`study report NAME` and `study export NAME`: analyse a study from its ledger.

`main` builds the measurement table from the ledger, computes the scaling report for the study
file's target (or ``--target``), writes it (HTML, Markdown, CSV, JSON; default all four) to
``--out`` or ``reports/NAME``, prints the files and a short summary, and attaches the files to
the study's MLflow parent run under ``report/``. `export` writes the measurement table as CSV or
Parquet.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from study.errors import UsageError

if TYPE_CHECKING:
    from study.config.study import StudyConfig
    from study.ledger import Ledger, StudyRecord
    from study.report.record import StudyFacts

_EXPORT_SUFFIXES = (".csv", ".parquet", ".pq")


def main(args: argparse.Namespace) -> int:
    """Write the report of study ``args.name``; return the exit status."""
    from study.analysis.load import ledger_table
    from study.ledger import Ledger
    from study.report import FORMATS, build_report, summary_lines, write_report

    if args.accelerators is not None and args.accelerators < 1:
        raise UsageError(f"--accelerators must be at least 1 (got {args.accelerators})")
    if args.bootstrap < 0:
        raise UsageError(f"--bootstrap must be 0 or more (got {args.bootstrap})")
    if not 0 < args.confidence < 1:
        raise UsageError(
            f"--confidence must be a level between 0 and 1, e.g. 0.9 (got {args.confidence})"
        )
    remote = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if remote and not args.no_mlflow:  # a dead tracking server fails before anything is written
        from study.tracking.server import check_answers

        check_answers(remote, "--tracking-uri" if args.tracking_uri else "MLFLOW_TRACKING_URI")
    ledger = Ledger.open(args.storage, args.name, create=False)
    summary = ledger.summary()  # UsageError for an unknown study
    record = ledger.require()
    pilot = ledger.notes.pilot()
    table = ledger_table(args.name, ledger.measurement_rows())
    config = _study_config(args, record)
    target = dataclasses.replace(_target(args, config, table), hold=record.hold_rule)
    formats = list(dict.fromkeys(args.format or FORMATS))
    out_dir = Path(args.out) if args.out else Path("reports") / args.name
    report = build_report(
        table,
        target,
        study=args.name,
        accelerators=args.accelerators,
        n_boot=args.bootstrap,
        confidence=args.confidence,
        state=summary.state,
        command=_command(args, target),
        context=_context(args),
        facts=_facts(ledger, record, config),
        pilot=pilot.to_stored() if pilot is not None else None,
        probe=[row.to_stored() for row in ledger.notes.throughput()],
    )
    paths = write_report(report, out_dir, formats)
    print(f"wrote {len(paths)} file(s) to {out_dir}:")
    for path in paths.values():
        print(f"  {path}")
    for line in summary_lines(report):
        print(line)
    if not args.no_mlflow:
        attached = attach_to_parent_run(
            args.name, list(paths.values()), args.tracking_uri, report.answers
        )
        if attached:
            print(f"attached to MLflow run {attached} under report/")
    return 0


def export(args: argparse.Namespace) -> int:
    """Write the measurement table of study ``args.name`` to ``args.out`` (.csv or .parquet)."""
    from study.analysis.load import ledger_table
    from study.analysis.table import export_table
    from study.ledger import Ledger

    out = Path(args.out)
    if out.suffix.lower() not in _EXPORT_SUFFIXES:
        raise UsageError(
            f"--out: cannot export to {str(out)!r}; the file name must end in .csv or .parquet "
            f"(got {out.suffix or 'no suffix'!r})"
        )
    ledger = Ledger.open(args.storage, args.name, create=False)
    ledger.require()  # UsageError for an unknown study
    table = ledger_table(args.name, ledger.measurement_rows())
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    export_table(table, out)
    trials = table["trial"].nunique() if len(table) else 0
    print(f"wrote {len(table)} measurements of {trials} trials to {out}")
    return 0


def _study_config(args: argparse.Namespace, record: StudyRecord) -> StudyConfig | None:
    return recorded_config(record, args.name)


def recorded_config(record: StudyRecord, name: str) -> StudyConfig | None:
    """The study file stored in the ledger, parsed (None for an imported study)."""
    if not record.config_text:
        return None
    import yaml

    from study.config.studyfile import parse_study

    text = record.config_text
    source = record.config_source or f"<study {name}>"
    return parse_study(yaml.safe_load(text), source, text=text)


def _target(args: argparse.Namespace, config: StudyConfig | None, table: Any) -> Any:
    """``--target`` if given, else the target of the study file stored in the ledger."""
    from study.config.target import Target

    if args.target:
        return Target.parse(args.target, option="--target")
    if config is None:
        from study.report.build import measured_metrics

        metrics = measured_metrics(table)
        example = metrics[0] if metrics else "val/classification_error"
        raise UsageError(
            f"study {args.name!r} was imported and has no target of its own; pass --target, "
            f"e.g. --target '{example}<0.1' (metrics: {', '.join(metrics) or 'none'})"
        )
    return config.target


def _command(args: argparse.Namespace, target: Any) -> str:
    """The command that made the report (its storage shown as `_context` shows it)."""
    parts = ["study", "report", args.name, "--target", str(target)]
    if args.accelerators is not None:
        parts += ["--accelerators", str(args.accelerators)]
    if args.confidence != 0.95:
        parts += ["--confidence", f"{args.confidence:g}"]
    if args.bootstrap == 0:
        parts += ["--bootstrap", "0"]
    if args.storage:
        parts += ["--storage", _storage(args)]
    return shlex.join(parts)


def _context(args: argparse.Namespace) -> dict[str, str]:
    """Where the study was read from: the storage, relative to the working directory (or its
    bare file name) and with any password masked."""
    return {"storage": _storage(args) if args.storage else f"{_storage(args)} (default)"}


def _storage(args: argparse.Namespace) -> str:
    from study.paths import JOURNAL, store_root
    from study.report.formatting import display_storage

    return display_storage(args.storage or str(store_root(create=False) / JOURNAL))


def _facts(ledger: Ledger, record: StudyRecord, config: StudyConfig | None) -> StudyFacts:
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
    from study.config.rules import FieldError
    from study.workloads import available, get_workload

    if config.model is not None or config.workload not in available():
        return config.model or ""
    try:
        return get_workload(config.workload, config.workload_options).check_model(None)
    except (UsageError, FieldError):
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


def attach_to_parent_run(
    study: str, files: list[Path], uri_option: str | None, answers: Any = None
) -> str | None:
    """Log ``files`` (the report just written) to the study's MLflow parent run under ``report/``,
    and ``answers`` (`Answers`) as its ``answer/*`` metrics and its ``study.answer`` tag.

    Only the written files are logged, not the whole output directory, so ``--out .`` does not
    upload whatever else lies there. The run's description then ends with the answer and where
    the report is (`study.tracking.descriptions.with_answer`).

    Returns:
        The run id, or None when there is no MLflow store, experiment or parent run (a study
        imported or run without tracking). Tracking errors are warnings: the report is written.
    """
    from study.paths import masked, tracking_store_exists, tracking_uri

    if not tracking_store_exists(uri_option):
        return None  # no local store: do not create one just to find no parent run
    uri = tracking_uri(uri_option)
    try:
        from mlflow.tracking import MlflowClient

        from study.tracking.study_tracker import parent_runs

        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(study)
        if experiment is None:
            return None
        runs = parent_runs(client, experiment.experiment_id)
        if not runs:
            return None
        run = runs[0]
        for path in files:
            client.log_artifact(run.info.run_id, str(path), "report")
        if answers is not None:
            log_answers(client, run.info.run_id, answers)
        _describe(client, run.info.run_id, files, answers)
        return run.info.run_id
    except Exception as exc:
        print(
            f"study report: warning: could not attach the report to MLflow ({masked(uri)}): "
            f"{type(exc).__name__}: {masked(str(exc).splitlines()[0], uri) if str(exc) else ''}",
            file=sys.stderr,
        )
        return None


def log_answers(client: Any, run_id: str, answers: Any) -> None:
    """The answers (`Answers`) on an MLflow run: ``answer/*`` metrics (estimate and interval
    ends) and the ``study.answer`` tag, the line a terminal shows."""
    import time

    from mlflow.entities import Metric, RunTag

    from study.report.answer_prose import answer_line

    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in answers.to_metrics().items()]
    client.log_batch(run_id, metrics=metrics, tags=[RunTag("study.answer", answer_line(answers))])


def _describe(client: Any, run_id: str, files: list[Path], answers: Any) -> None:
    """The answer and where the report is, in the answer section of the run's description."""
    from study.report.answer_prose import answer_line
    from study.tracking.study_tracker import set_answer

    names = [path.name for path in files]
    shown = "report.html" if "report.html" in names else names[0] if names else None
    where = f"`report/{shown}` in this run's Artifacts tab" if shown else None
    set_answer(client, run_id, answer_line(answers) if answers is not None else None, where)
