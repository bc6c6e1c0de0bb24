"""`study ladder STUDY STUDY ...`: finished studies at growing training-set sizes joined into a
ladder, the laws of B_noise, the critical batch size, the best batch size and the best rate in
the data size, and the answers at a data size no rung trained on
(`study.analysis.data_ladder`, read by `study.report.ladder`).

Example::

    study ladder d5k d10k d20k                       # data sizes the trials recorded
    study ladder d5k d10k --data-size 5000 10000 --predict 20000 --json
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from study.errors import ExitCode, FieldError, UsageError

FLAGS = {
    "studies": "STUDY",
    "data_sizes": "--data-size",
    "target": "--target",
    "predict": "--predict",
}
"""The flag (or argument) that names each field of the ladder in an error."""


def add_ladder(sub: Any) -> None:
    """The ``ladder`` command's parser."""
    from study.commands.flags import add_storage

    p = sub.add_parser(
        "ladder",
        help="join finished studies at growing training-set sizes: laws in the data size and "
        "the answer at the next rung",
        description="Each finished study is a rung at its training-set size (the training "
        "examples its trials recorded, or --data-size), answered by its model of every trial. "
        "Prints per rung its training steps, B_noise, the critical batch size, the batch size "
        "for N accelerators and the best rate with their intervals; the power law of each in the data size D "
        "(weighted least squares in log-log, the exponent with its interval); and with "
        "--predict the answers at another data size, each with an interval for the answer "
        "there (a study run there adds its own noise), refused past "
        "one fitted range of log D beyond the rungs.",
    )
    p.add_argument("studies", nargs="+", metavar="STUDY", help="finished studies (see `study ls`)")
    p.add_argument(
        "--data-size",
        dest="data_sizes",
        nargs="+",
        action="extend",
        metavar="N",
        help="each study's training-set size (examples), in the order of the studies "
        "(default: the size its trials recorded)",
    )
    p.add_argument(
        "--predict",
        nargs="+",
        action="extend",
        metavar="N",
        help="predict the answers at these training-set sizes (examples), e.g. 40000",
    )
    p.add_argument("--target", help="another target for every rung, e.g. 'val_accuracy>=0.7'")
    p.add_argument(
        "--accelerators",
        type=int,
        metavar="N",
        help="batch sizes for N accelerators (default: the rungs' largest replica count, at "
        "least 8)",
    )
    p.add_argument(
        "--confidence", type=float, default=0.95, help="every interval's level (default: 0.95)"
    )
    p.add_argument("--json", action="store_true", help="the rungs, laws and predictions as JSON")
    add_storage(p)
    p.set_defaults(handler=main)


def parse_sizes(values: list[str] | None, flag: str) -> list[float] | None:
    """``--data-size`` / ``--predict``: positive numbers of examples (``5000``, ``5e4``,
    ``50,000``), None when not given.

    Raises:
        UsageError: a value that is not a positive finite number.
    """
    if values is None:
        return None
    out = []
    for text in values:
        try:
            value = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise UsageError(
                f"{flag} must be a positive number of training examples, e.g. 20000 (got {text!r})"
            )
        out.append(value)
    return out


def main(args: argparse.Namespace) -> int:
    """Fit the ladder of ``args.studies``; print it (and the predictions); exit 2 when a
    prediction is refused."""
    from study.config.target import Target
    from study.ledger import Ledger
    from study.paths import study_name
    from study.report.ladder import ladder_dict, ladder_lines, stored_ladder

    if args.accelerators is not None and args.accelerators < 1:
        raise UsageError(f"--accelerators must be at least 1 (got {args.accelerators})")
    if not 0 < args.confidence < 1:
        raise UsageError(
            f"--confidence must be a level between 0 and 1, e.g. 0.9 (got {args.confidence})"
        )
    sizes = parse_sizes(args.data_sizes, "--data-size")
    predict = parse_sizes(args.predict, "--predict") or []
    names = [study_name(n, called="STUDY") or "" for n in args.studies]
    if len(set(names)) < len(names):
        raise UsageError(f"STUDY: each study may be a rung once (got {' '.join(names)})")
    target = Target.parse(args.target, option="--target") if args.target else None
    ledgers = [Ledger.open(args.storage, name, create=False) for name in names]
    try:
        ladder = stored_ladder(
            ledgers,
            data_sizes=sizes,
            target=target,
            accelerators=args.accelerators,
            confidence=args.confidence,
        )
    except FieldError as err:
        flag = FLAGS.get(err.field)
        raise (err.named(flag) if flag and err.name == err.field else err) from None
    predictions = [ladder.predict(n) for n in predict]
    refused = next((p for p in predictions if not p.ok), None)
    if refused is not None:
        raise UsageError(f"--predict: {refused.line()}")
    if args.json:
        print(json.dumps({"studies": names, **ladder_dict(ladder, predictions)}, indent=1))
    else:
        print("\n".join(ladder_lines(ladder, predictions)))
    return ExitCode.OK
