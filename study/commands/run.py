"""`study run FILE` and `study resume NAME`: run a study until its trial budget is spent."""

from __future__ import annotations

import argparse

from study.errors import UsageError


def options(args: argparse.Namespace):
    from study.runner.engine import RunOptions

    return RunOptions(
        tuner=args.tuner,
        trials=args.trials,
        workers=args.workers,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
    )


def main(args: argparse.Namespace) -> int:
    from study.config.studyfile import load_study_file

    config = load_study_file(args.file)
    return _run(config, args)


def resume(args: argparse.Namespace) -> int:
    import yaml

    from study.config.studyfile import parse_study
    from study.ledger import Ledger, open_storage

    attrs = Ledger(open_storage(args.storage), args.name).root_attrs()
    if not attrs.get("config_text"):
        raise UsageError(
            f"no study named {args.name!r} in this storage; `study ls` lists the studies"
        )
    source = attrs.get("config_source") or f"<study {args.name}>"
    config = parse_study(yaml.safe_load(attrs["config_text"]), source, text=attrs["config_text"])
    if args.tuner is None:
        args.tuner = attrs.get("tuner", "both")
    return _run(config, args)


def _run(config, args: argparse.Namespace) -> int:
    if getattr(args, "tuner", None) is None:
        args.tuner = "both"
    opts = options(args)
    from study.runner.engine import StudyEngine

    return StudyEngine(config, opts).run()
