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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from study.errors import ExitCode, FieldError, UsageError

if TYPE_CHECKING:
    from study.ledger import Ledger

_EXPORT_SUFFIXES = (".csv", ".parquet", ".pq")


def main(args: argparse.Namespace) -> int:
    """Write the report of study ``args.name``; return the exit status."""
    from study.commands.flags import in_flags
    from study.commands.target_flags import parse_levels, parse_predict
    from study.config.target import Target
    from study.ledger import Ledger
    from study.report import FORMATS, summary_lines, write_report
    from study.report.stored import stored_report

    if args.accelerators is not None and args.accelerators < 1:
        raise UsageError(f"--accelerators must be at least 1 (got {args.accelerators})")
    if args.overhead is not None and not 0 < args.overhead <= 10:
        raise UsageError(
            f"--overhead must be a share above perfect scaling in (0, 10], e.g. 0.2 for 20% "
            f"(got {args.overhead:g})"
        )
    if not 0 < args.confidence < 1:
        raise UsageError(
            f"--confidence must be a level between 0 and 1, e.g. 0.9 (got {args.confidence})"
        )
    remote = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if remote and not args.no_mlflow:  # a dead tracking server fails before anything is written
        from study.tracking.server import check_answers

        check_answers(remote, "--tracking-uri" if args.tracking_uri else "MLFLOW_TRACKING_URI")
    ledger = Ledger.open(args.storage, args.name, create=False)
    target = Target.parse(args.target, option="--target") if args.target else None
    levels = parse_levels(args.targets)
    predict = parse_predict(args.predict_target, target or _own_target(ledger))
    try:
        report = stored_report(
            ledger,
            target=target,
            accelerators=args.accelerators,
            confidence=args.confidence,
            overhead=args.overhead,
            command=_command(args, target or _own_target(ledger)),
            context=_context(args),
            targets=levels,
            predict=predict,
        )
    except FieldError as err:
        raise in_flags(err) from None
    prediction = report.targets.prediction if report.targets is not None else None
    if prediction is not None and not prediction.ok:  # refused before anything is written
        raise UsageError(f"--predict-target: {prediction.line()}")
    formats = list(dict.fromkeys(args.format or FORMATS))
    out_dir = Path(args.out) if args.out else Path("reports") / args.name
    paths = write_report(report, out_dir, formats)
    print(f"wrote {len(paths)} file(s) to {out_dir}:")
    for path in paths.values():
        print(f"  {path}")
    for line in summary_lines(report):
        print(line)
    if not args.no_mlflow:
        attached = attach_to_parent_run(
            args.name, list(paths.values()), args.tracking_uri, report.answers, prediction
        )
        if attached:
            print(f"attached to MLflow run {attached} under report/")
    return ExitCode.OK


def export(args: argparse.Namespace) -> int:
    """Write the measurement table of study ``args.name`` to ``args.out`` (.csv or .parquet)."""
    from study.analysis.table import export_table
    from study.ledger import Ledger
    from study.report.stored import stored_table

    out = Path(args.out)
    if out.suffix.lower() not in _EXPORT_SUFFIXES:
        raise UsageError(
            f"--out: cannot export to {str(out)!r}; the file name must end in .csv or .parquet "
            f"(got {out.suffix or 'no suffix'!r})"
        )
    ledger = Ledger.open(args.storage, args.name, create=False)
    ledger.require()  # StudyNotFound for an unknown study
    table = stored_table(ledger)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    export_table(table, out)
    trials = table["trial"].nunique() if len(table) else 0
    print(f"wrote {len(table)} measurements of {trials} trials to {out}")
    return ExitCode.OK


def _own_target(ledger: Ledger) -> Any:
    """The study's own target with its hold rule, for the report's command line (None for an
    imported study, whose report then fails on ``--target``)."""
    from study.report.stored import stored_config

    record = ledger.require()
    config = stored_config(record, ledger.name)
    return None if config is None else dataclasses.replace(config.target, hold=record.hold_rule)


def _command(args: argparse.Namespace, target: Any) -> str:
    """The command that made the report (its storage shown as `_context` shows it)."""
    parts = ["study", "report", args.name, "--target", str(target)]
    if args.accelerators is not None:
        parts += ["--accelerators", str(args.accelerators)]
    if args.confidence != 0.95:
        parts += ["--confidence", f"{args.confidence:g}"]
    if args.overhead is not None:
        parts += ["--overhead", f"{args.overhead:g}"]
    if getattr(args, "targets", None):
        parts += ["--targets", args.targets]
    if getattr(args, "predict_target", None):
        parts += ["--predict-target", args.predict_target]
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


def attach_to_parent_run(
    study: str,
    files: list[Path],
    uri_option: str | None,
    answers: Any = None,
    prediction: Any = None,
) -> str | None:
    """`attach_report` with the answers (`Answers`) as metrics and their one line, and a
    prediction at another target (`TargetPrediction`) as the ``study.prediction`` tag."""
    from study.report.answer_prose import answer_line
    from study.tracking.report_run import attach_report

    return attach_report(
        study,
        files,
        uri_option,
        metrics=answers.to_metrics() if answers is not None else None,
        answer=answer_line(answers) if answers is not None else None,
        tags=prediction_tags(prediction),
    )


def prediction_tags(prediction: Any) -> dict[str, str]:
    """The parent run's tags for a prediction at another target: ``study.prediction`` (its
    line, which says what it assumed) and ``study.prediction_target``; none without one."""
    if prediction is None:
        return {}
    return {
        "study.prediction": prediction.line(),
        "study.prediction_target": str(prediction.target),
    }
