"""`study check-workload WORKLOAD`: a workload checked end to end before a study.

Builds it with the options `study train` takes, loads the data, checks them, builds the model
in the strategy's scope, runs one training step and evaluates (`study.trainer.check`). Every
problem is one line naming the flag and the fix (exit 2); success prints a short summary.
TensorFlow is imported only once the data have been loaded and checked.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from study.commands.train import workload_options
from study.errors import ExitCode, UsageError


def main(args: argparse.Namespace) -> int:
    if args.spec is not None and args.workload not in (args.spec, "mnist1d"):
        raise UsageError(
            f"WORKLOAD {args.spec!r} and --workload {args.workload!r} disagree; "
            "name the workload once"
        )
    args.workload = args.spec or args.workload  # names the workload (and its flags' errors)
    from study.trainer.check import check_workload

    result = check_workload(
        args.workload,
        workload_options(args),
        model=args.model,
        strategy=args.strategy if args.strategy != "auto" else "default",
        batch_size=args.batch_size,
        loss=args.loss,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    if args.json:
        print(json.dumps(asdict(result), default=str))
    else:
        print(f"ok: {result.summary()}")
    return ExitCode.OK
