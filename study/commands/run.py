"""`study run FILE` and `study resume NAME`: run a study until its trial budget is spent.

Ctrl-C and SIGTERM stop a run cleanly (exit 130 and 143): the running trials are closed as
``interrupted`` (their MLflow runs KILLED) and their slots run again. `stored_study` and
`run_config` also serve `study worker` (`study.commands.worker`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from study.config.study import StudyConfig

if TYPE_CHECKING:
    from study.ledger import StudyRecord


def main(args: argparse.Namespace) -> int:
    from study.config.studyfile import load_study_file
    from study.workloads.resolve import check_study

    config = load_study_file(study_file(args), check=check_study)
    return run_config(config, args, tuner=args.tuner or "both")


def study_file(args: argparse.Namespace) -> str:
    """The study file ``study run`` runs: FILE, or the shipped example ``--example NAME``.

    Raises:
        UsageError: both or neither given; ``--example: unknown example 'x'; choose from ...``.
    """
    from study import examples
    from study.errors import FieldError, UsageError

    if args.file is not None and args.example is not None:
        raise UsageError("give a study file or --example NAME, not both")
    if args.file is None and args.example is None:
        raise UsageError(
            f"give a study file, or --example NAME (e.g. --example {examples.STARTER})"
        )
    if args.file is not None:
        return str(args.file)
    try:
        return str(examples.path(args.example))
    except FieldError as err:
        raise err.named("--example") from None


def resume(args: argparse.Namespace) -> int:
    config, record = stored_study(args.storage, args.name)
    return run_config(config, args, tuner=args.tuner or record.tuner or "both")


def stored_study(storage: str | None, name: str) -> tuple[StudyConfig, StudyRecord]:
    """A study's config as its ledger stores it, and its record.

    Raises:
        UsageError: no study of that name in the storage, or it was imported (no study file).
    """
    import yaml

    from study.config.studyfile import parse_study
    from study.errors import UsageError
    from study.ledger import Ledger

    record = Ledger.open(storage, name, create=False).require()
    if record.imported:
        raise UsageError(
            f"study {name!r} was imported and has no study file to run; `study report` analyses it"
        )
    source = record.config_source or f"<study {name}>"
    config = parse_study(yaml.safe_load(record.config_text), source, text=record.config_text)
    return config, record


def run_config(config: StudyConfig, args: argparse.Namespace, *, tuner: str) -> int:
    """Run ``config`` with the options of ``args`` (``--trials`` where the command has it),
    SIGTERM stopping it as Ctrl-C does; return the exit status."""
    from study.runner import heap, spawning

    spawning.warm()  # TensorFlow's import in the worker server overlaps the host's imports
    with heap.paused():  # until the preflight has passed (`run_study`)
        return _run_config(config, args, tuner=tuner)


def _run_config(config: StudyConfig, args: argparse.Namespace, *, tuner: str) -> int:
    from study.paths import where
    from study.runner.launch import RunOptions, run_study
    from study.runner.stopping import sigterm_interrupts

    print(f"study {config.name}: stored in {where(args.storage, args.tracking_uri)}", flush=True)

    options = RunOptions(
        tuner=tuner,
        trials=getattr(args, "trials", None),
        workers=args.workers,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        max_trials=args.max_trials,
        storage_retry=getattr(args, "storage_retry", None),
    )
    with sigterm_interrupts():
        return run_study(config, options)
