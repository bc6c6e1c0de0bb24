"""`study run FILE` and `study resume NAME`: run a study until its trial budget is spent."""

from __future__ import annotations

import argparse

from study.config.study import StudyConfig


def main(args: argparse.Namespace) -> int:
    from study.config.studyfile import load_study_file

    return _run(load_study_file(args.file), args, tuner=args.tuner or "both")


def resume(args: argparse.Namespace) -> int:
    import yaml

    from study.config.studyfile import parse_study
    from study.ledger import Ledger

    record = Ledger.open(args.storage, args.name, create=False).require()
    if record.imported:
        from study.errors import UsageError

        raise UsageError(
            f"study {args.name!r} was imported and has no study file to run; "
            "`study report` analyses it"
        )
    source = record.config_source or f"<study {args.name}>"
    config = parse_study(yaml.safe_load(record.config_text), source, text=record.config_text)
    return _run(config, args, tuner=args.tuner or record.tuner or "both")


def _run(config: StudyConfig, args: argparse.Namespace, *, tuner: str) -> int:
    from study.runner.launch import RunOptions, run_study

    options = RunOptions(
        tuner=tuner,
        trials=args.trials,
        workers=args.workers,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
    )
    return run_study(config, options)
