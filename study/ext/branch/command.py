"""`study branch FILE`: CBS(t) from branch trials (`study.ext.branch.branching`), printed, logged
to the reference's MLflow run, and the schedule derived from it (``--schedule-out``)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from study.commands.records import from_flags
from study.config.study import StudyConfig
from study.errors import ExitCode
from study.ext.branch.agreement import answer_triple
from study.ext.branch.defaults import StudyEvidence
from study.ext.branch.section import branch_of


def main(args: argparse.Namespace) -> int:
    from study.config.studyfile import load_study_file
    from study.ext.branch.branching import BranchOptions, run_branches
    from study.workloads.resolve import check_study

    config = load_study_file(args.file, check=check_study)
    options = from_flags(BranchOptions, args)
    alpha, rate, evidence = fitted_rule(config, args.storage)
    say = (lambda _line: None) if args.json else print
    run_branches(config, options, fitted_alpha=alpha, best_rate=rate, evidence=evidence, say=say)
    from study.ext.branch.ledger import BranchLedger

    ledger = BranchLedger.open(args.storage, config.name)
    if ledger.waiting():
        print(f"study branch: {ledger.waiting()} branches left to other processes (waiting)")
        return ExitCode.OK
    if ledger.running():  # claimed elsewhere (or by a process that died): read what finished
        print(
            f"study branch: {ledger.running()} branches still running elsewhere; CBS(t) from "
            "the finished ones",
            file=sys.stderr,
        )
    report = study_cbs(config, args.storage)
    if report is None or report.curve.empty:
        print("study branch: no finished branch to read CBS(t) from", file=sys.stderr)
        return ExitCode.FAILED
    _log(report, config, args.tracking_uri)
    if args.schedule_out and report.schedule is not None:
        Path(args.schedule_out).write_text(report.schedule.snippet(), encoding="utf-8")
    if args.json:
        print(json.dumps(report.to_dict(), indent=1, default=_plain))
        return ExitCode.OK
    print(_table(report))
    for line in report.lines():
        print(line)
    if args.schedule_out and report.schedule is not None:
        print(f"schedule written to {args.schedule_out}")
    return ExitCode.OK


def fitted_rule(
    config: StudyConfig, storage: str | None
) -> tuple[float | None, float | None, StudyEvidence | None]:
    """The study's fitted alpha, its best rate at ``B0`` (None each when it has none) and what
    the branch defaults take from it (None before the study has a record)."""
    from study.ledger import Ledger, best_of
    from study.report.stored import stored_answers

    ledger = Ledger.open(storage, config.name, create=False)
    if ledger.record() is None:
        return None, None, None
    answers = stored_answers(ledger)
    alpha = answers.alpha.estimate if answers is not None and answers.alpha is not None else None
    branch = branch_of(config)
    b0 = (branch.batch_size if branch else None) or min(config.space.batch_sizes)
    best = None
    for stratum in ledger.strata():
        if stratum.batch_size == b0:
            best = best_of(ledger.trials(stratum)) or best
    evidence = StudyEvidence(
        b0=b0,
        examples_to_target=best.result.examples_to_target if best and best.result else None,
        trial=f"{best.stratum}#{best.number}" if best is not None else "",
        examples_to_first=_first_crossing(best, config),
        b_noise=_triple(answers.b_noise if answers is not None else None),
        critical=_triple(answers.critical_batch if answers is not None else None),
        largest=max(config.space.batch_sizes),
        target=str(config.target),
        curve=_loss_curve(best),
        alpha=_triple(answers.alpha if answers is not None else None),
        optimizer=config.optimizer,
    )
    return alpha, (best.learning_rate if best is not None else None), evidence


def _triple(answer: Any) -> tuple[float, float, float] | None:
    return answer_triple(answer)


def _first_crossing(trial: Any, config: StudyConfig) -> int | None:
    """The examples at which a trial's curve first met the target (None: never)."""
    if trial is None or trial.result is None:
        return None
    met = (m.examples for m in trial.result.curve if config.target.met_by(m.metrics))
    return next(met, None)


def _loss_curve(trial: Any) -> tuple[tuple[float, float], ...]:
    """A trial's (examples, val_loss) on its evaluation cadence (none: empty)."""
    if trial is None or trial.result is None:
        return ()
    return tuple(
        (float(m.examples), float(m.metrics["val_loss"]))
        for m in trial.result.curve
        if "val_loss" in m.metrics and not m.fine
    )


def study_cbs(config: StudyConfig, storage: str | None) -> Any:
    """The study's `CbsReport` with its trials' cost, fitted B_noise and critical batch size
    when it has them."""
    import pandas as pd

    from study.ext.branch.report import stored_cbs
    from study.ledger import Ledger
    from study.report.stored import stored_answers

    ledger = Ledger.open(storage, config.name, create=False)
    trials, b_noise, critical = None, None, None
    if ledger.record() is not None:
        rows = [
            {"steps_run": t.result.steps_run, "examples_run": t.result.examples_run}
            for s in ledger.strata()
            for t in ledger.trials(s)
            if t.result is not None
        ]
        trials = pd.DataFrame(rows, columns=["steps_run", "examples_run"])
        answers = stored_answers(ledger)
        if answers is not None:
            b_noise = _triple(answers.b_noise)
            critical = _triple(answers.critical_batch)
    return stored_cbs(config, storage, study_trials=trials, b_noise=b_noise, critical=critical)


def _log(report: Any, config: StudyConfig, uri: str | None) -> None:
    from study.ext.branch.tracking import BranchTracker
    from study.paths import tracking_uri

    tracker = BranchTracker(tracking_uri(uri), config.name)
    tracker.log_cbs(str(report.reference["run_id"]), report.curve.to_dict(orient="records"))


def _table(report: Any) -> str:
    lines = ["checkpoint  examples  CBS  (interval)        B_simple  B0 loss"]
    for _, r in report.curve.iterrows():
        high = "inf" if not math.isfinite(r["cbs_high"]) else f"{r['cbs_high']:.0f}"
        b_simple = r.get("b_simple", math.nan)
        lines.append(
            f"{int(r['checkpoint']):>10}  {int(r['examples']):>8}  {r['cbs']:>4.0f}  "
            f"({r['cbs_low']:.0f} to {high}){'':>6}  {b_simple:>8.1f}  {r['baseline_loss']:.4f}"
        )
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
