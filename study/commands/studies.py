"""`study ls` and `study status NAME`: what the ledger holds (no TensorFlow, no MLflow)."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from study.errors import UsageError


def study_summary(storage: Any, name: str) -> dict[str, Any]:
    """Per-stratum trial counts and best results of one study, read from the ledger."""
    from optuna.trial import TrialState as OptunaState

    from study.ledger import UNCOUNTED, Ledger, owner_alive

    ledger = Ledger(storage, name)
    attrs = ledger.root_attrs()
    if not attrs.get("config_text") and attrs.get("kind") != "imported":
        raise UsageError(f"no study named {name!r} in this storage; `study ls` lists the studies")
    prefix = f"{name}/"
    strata = []
    for s in storage.get_all_studies():
        if not s.study_name.startswith(prefix):
            continue
        trials = [
            t
            for t in storage.get_all_trials(s._study_id, deepcopy=False)
            if t.user_attrs.get("status") not in UNCOUNTED
            and not _died_running(t)  # its slot runs again on the next start
        ]
        reached = [t for t in trials if t.user_attrs.get("status") == "reached"]
        best = min(
            reached,
            key=lambda t: (t.user_attrs["steps_to_target"], t.params.get("learning_rate", 0)),
            default=None,
        )
        running = [
            t
            for t in trials
            if t.state is OptunaState.RUNNING and owner_alive(t.user_attrs.get("owner"))
        ]
        counts: dict[str, int] = {}
        for t in trials:
            status = t.user_attrs.get("status", "running")
            counts[status] = counts.get(status, 0) + 1
        strata.append(
            {
                "stratum": s.study_name.removeprefix(prefix),
                "batch_size": s.user_attrs.get("batch_size"),
                "strategy": s.user_attrs.get("strategy"),
                "trials": len(trials) - len(running),
                "running": len(running),
                "statuses": counts,
                "best_steps": best.user_attrs["steps_to_target"] if best else None,
                "best_learning_rate": best.params.get("learning_rate") if best else None,
                "best_trial": best.number if best else None,
                "best_tuner": best.user_attrs.get("tuner") if best else None,
            }
        )
    strata.sort(key=lambda r: (str(r["strategy"]), r["batch_size"] or 0))
    total = int(attrs.get("trials_total") or 0)
    done = sum(r["trials"] for r in strata)
    running = sum(r["running"] for r in strata)
    state = "running" if running else ("complete" if total and done >= total else "incomplete")
    if attrs.get("kind") == "imported":
        state = "imported"
    return {
        "study": name,
        "state": state,
        "trials_done": done,
        "trials_total": total or done,
        "running": running,
        "strata": strata,
    }


def _died_running(trial: Any) -> bool:
    """A trial still RUNNING in the ledger whose process is gone (not yet marked interrupted)."""
    from optuna.trial import TrialState as OptunaState

    from study.ledger import owner_alive

    return trial.state is OptunaState.RUNNING and not owner_alive(trial.user_attrs.get("owner"))


def ls(args: argparse.Namespace) -> int:
    from study.ledger import list_studies, open_storage

    storage = open_storage(args.storage)
    rows = [study_summary(storage, name) for name in list_studies(storage)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no studies yet; start one with `study run search_spaces/quickstart.yaml`")
        return 0
    print(f"{'study':<32}{'trials':>12}{'strata':>8}  state")
    for r in rows:
        print(
            f"{r['study']:<32}{r['trials_done']:>6}/{r['trials_total']:<5}{len(r['strata']):>8}  {r['state']}"
        )
    return 0


def status(args: argparse.Namespace) -> int:
    from study.ledger import open_storage

    summary = study_summary(open_storage(args.storage), args.name)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(
        f"study {summary['study']}: {summary['trials_done']}/{summary['trials_total']} trials, {summary['state']}"
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
    return 0
