"""`study ls` and `study status NAME`: what the ledger holds (no TensorFlow, no MLflow).

`status` shows per stratum the trial counts and the best trial, then where the trials' wall
time went: mean seconds per trial of each part (build, trace, train, evaluate, bookkeeping)
and of the whole, and the share of the wall time that is training ("-": not measured). The
ledger's wall time runs from handing a trial to a worker to just before its ledger write
(MLflow's ``timing/wall_seconds`` also counts that write and the tuner's report).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from study.errors import ExitCode


def study_answers_of(storage: Any, name: str) -> Any:
    """The answers of the model of every trial for a study's own target (`stored_answers`), or
    None."""
    from study.ledger import Ledger
    from study.report.stored import stored_answers

    return stored_answers(Ledger(storage, name))


def study_summary(storage: Any, name: str) -> dict[str, Any]:
    """Per-stratum trial counts and best results of one study, read from the ledger.

    Raises:
        UsageError: no study of that name in the storage.
    """
    from study.ledger import Ledger

    return Ledger(storage, name).summary().to_dict()


def ls(args: argparse.Namespace) -> int:
    """The studies of the ledger, then a line naming the store (`study.paths.where`)."""
    from study.ledger import list_studies, open_storage
    from study.paths import where

    storage = open_storage(args.storage, create=False)
    rows = [study_summary(storage, name) for name in list_studies(storage)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return ExitCode.OK
    store = where(args.storage, runs=False)
    if not rows:
        print(f"no studies yet in {store}; start one with `study run --example quickstart`")
        return ExitCode.OK
    print(f"{'study':<32}{'trials':>12}{'strata':>8}  state")
    for r in rows:
        print(
            f"{r['study']:<32}{r['trials_done']:>6}/{r['trials_total']:<5}{len(r['strata']):>8}  {r['state']}"
        )
    print(f"stored in {store}")
    return ExitCode.OK


def status(args: argparse.Namespace) -> int:
    from study.ledger import open_storage
    from study.report.answer_prose import answer_line
    from study.report.json import answers_dict, plain

    storage = open_storage(args.storage, create=False)
    summary = study_summary(storage, args.name)
    answers = study_answers_of(storage, args.name)
    if args.json:
        summary["answers"] = None if answers is None else plain(answers_dict(answers))
        print(json.dumps(summary, indent=2))
        return ExitCode.OK
    ended = f" ({summary['ended']})" if summary.get("ended") else ""
    print(
        f"study {summary['study']}: {summary['trials_done']}/{summary['trials_total']} trials, "
        f"{summary['state']}{ended}"
    )
    print(
        f"{'stratum':<26}{'trials':>7}{'reached':>9}{'pruned':>8}{'diverged':>10}{'best steps':>12}{'best lr':>10}  tuner"
    )
    for r in summary["strata"]:
        c = r["statuses"]
        best = r["best_steps"]
        lr = r["best_learning_rate"]
        print(
            f"{r['stratum']:<26}{r['trials']:>7}{c.get('reached', 0):>9}{c.get('pruned', 0):>8}"
            f"{c.get('diverged', 0):>10}{best if best is not None else '-':>12}"
            f"{(f'{lr:.3g}' if lr is not None and math.isfinite(lr) else '-'):>10}  {r['best_tuner'] or ''}"
        )
    print(_hold_line(summary))
    if answers is not None:
        print(f"answer: {answer_line(answers)}")
    if summary["timings"]["trials"]:
        print()
        print(timing_table(summary))
    return ExitCode.OK


def _hold_line(summary: dict[str, Any]) -> str:
    """How steps to target were read, and how many trials crossed the target and fell back."""
    from study.config.hold import Hold

    hold = Hold.from_param(summary["target_hold"])
    if not hold.active:
        return "steps to target: the first evaluation that met the target"
    fell = summary["fell_back"]
    return (
        f"steps to target: from the step the target held from, {hold}; "
        f"{fell} trial(s) crossed it and fell back before it held"
    )


def timing_table(summary: dict[str, Any]) -> str:
    """The mean seconds per trial of each part, per stratum and for the whole study (``all``),
    from `study_summary`'s dictionary; strata with no timed trial are left out.

    Example row: ``b128/default  6  0.052  0.310  0.034  0.120  0.040  0.556  6.1%``.
    """
    from study.ledger.records import TIMING_KEYS

    widths = {k: max(9, len(k) + 2) for k in TIMING_KEYS}
    head = f"{'time per trial (mean s)':<26}{'timed':>7}"
    lines = [head + "".join(f"{k:>{widths[k]}}" for k in TIMING_KEYS) + f"{'train share':>13}"]
    rows = [(r["stratum"], r["timings"]) for r in summary["strata"]]
    for label, timings in [*rows, ("all", summary["timings"])]:
        if not timings["trials"]:
            continue
        means = timings["mean_seconds"]
        share = timings["train_share"]
        lines.append(
            f"{label:<26}{timings['trials']:>7}"
            + "".join(f"{_seconds(means.get(k)):>{widths[k]}}" for k in TIMING_KEYS)
            + f"{(f'{100 * share:.1f}%' if share is not None else '-'):>13}"
        )
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
