"""`study schedule NAME`: a batch-size schedule derived from a finished study by a stated rule
(`study.ext.schedules.rules`), printed or written as a ``batch_schedule:`` snippet that a
study file (its schedule trials) or ``study train --batch-schedule FILE`` runs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from study.errors import ExitCode, FieldError, UsageError


def main(args: argparse.Namespace) -> int:
    """Derive the schedule of study ``args.name``; return the exit status."""
    from study.commands.flags import in_flags
    from study.config.target import Target
    from study.ext.schedules.report import derive_from_report
    from study.ledger import Ledger
    from study.report.stored import stored_report

    if args.stage_warmup < 0:
        raise UsageError(f"--stage-warmup must be 0 or more steps (got {args.stage_warmup})")
    if args.seeds < 1:
        raise UsageError(f"--seeds must be at least 1 (got {args.seeds})")
    ledger = Ledger.open(args.storage, args.name, create=False)
    target = Target.parse(args.target, option="--target") if args.target else None
    try:
        report = stored_report(ledger, target=target)
    except FieldError as err:
        raise in_flags(err) from None
    derived, strategy = derive_from_report(
        report, rule=args.rule, rate=args.rate, stage_warmup_steps=args.stage_warmup,
        strategy=args.strategy,
    )  # fmt: skip
    snippet = derived.schedule.snippet(seeds=args.seeds, strategy=strategy)
    if args.json:
        print(
            json.dumps(
                {
                    "study": args.name,
                    "rule": args.rule,
                    "rate": args.rate,
                    "strategy": strategy,
                    "best_batch": derived.best_batch,
                    "best_rate": derived.best_rate,
                    "best_examples": derived.best_examples,
                    "why": list(derived.why),
                    "batch_schedule": derived.schedule.to_mapping(),
                },
                indent=1,
            )
        )
    else:
        for line in derived.why:
            print(f"# {line}")
        print(snippet, end="" if snippet.endswith("\n") else "\n")
    if args.out:
        Path(args.out).write_text(snippet, encoding="utf-8")
        if not args.json:
            print(f"schedule written to {args.out}")
    return ExitCode.OK
