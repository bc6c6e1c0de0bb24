"""Chaos: rounds of a 3-worker study on a real PostgreSQL and a real ``mlflow server`` while a
driver SIGKILLs and SIGTERMs workers (started again), restarts PostgreSQL the hard way and
kills and restarts the tracking server, at moments drawn from each round's seed
(`tests.chaos`, the driver tests/runner/test_chaos.py runs once).

Both services are started once, as the tests start them (`tests.services`: a durable
PostgreSQL on a loopback port; ``mlflow server`` on SQLite with served artifacts, restarted on
its port); each round has a database and an MLflow experiment of its own. Per round: trials
finished against the budget, lost (budget slots with no finished trial) and duplicated
(finished trials beyond the budget), trials and MLflow runs left RUNNING, finished trials
missing from MLflow or in it twice, failed trials, starts refused while a service was down,
unexpected exits, and the round's wall time.

Usage: python benchmarks/chaos.py [--rounds 20] [--seed 0] [--per-stratum 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
# One code version for every worker of every round, though the checkout may change meanwhile.
os.environ.setdefault("STUDY_CODE_VERSION", "chaos-benchmark")

from tests.chaos import KILL, POSTGRES, TERM, TRACKING, Verdict, chaos_round, describe  # noqa: E402
from tests.services import mlflow_process, postgresql_server  # noqa: E402

#: Each round: every kind of event once.
KINDS = (KILL, TERM, POSTGRES, TRACKING)


def totals(verdicts: list[Verdict]) -> dict[str, float]:
    """The sums over the rounds, and the median and longest round time."""
    keys = ("lost", "duplicated", "running_trials", "running_runs", "missing_runs")
    out: dict[str, float] = {k: sum(getattr(v, k) for v in verdicts) for k in keys}
    out["doubled_runs"] = sum(v.doubled_runs for v in verdicts)
    out["failed"] = sum(len(v.failed) for v in verdicts)
    out["unexpected"] = sum(len(v.unexpected) for v in verdicts)
    out["refused"] = sum(v.refused for v in verdicts)
    out["timed_out"] = sum(v.timed_out for v in verdicts)
    out["events"] = sum(len(v.events) for v in verdicts)
    out["clean_rounds"] = sum(v.clean for v in verdicts)
    out["median_s"] = statistics.median(v.seconds for v in verdicts)
    out["max_s"] = max(v.seconds for v in verdicts)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="round i uses seed SEED + i")
    parser.add_argument("--per-stratum", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    verdicts: list[Verdict] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="study-chaos-") as tmp:
        root = Path(tmp)
        with postgresql_server(durable=True) as pg, mlflow_process(root / "mlflow") as tracking:
            for i in range(args.rounds):
                cwd = root / f"round{i}"
                cwd.mkdir()
                verdict = chaos_round(
                    pg, tracking, cwd, args.seed + i, per_stratum=args.per_stratum, kinds=KINDS
                )
                verdicts.append(verdict)
                print(f"round {i + 1}/{args.rounds}: {describe(verdict)}", flush=True)
    summary = totals(verdicts)
    print(
        f"{args.rounds} rounds, {summary['events']:.0f} events, {time.monotonic() - began:.0f} s: "
        + ", ".join(f"{k} {v:g}" for k, v in summary.items() if k != "events")
    )
    if args.json:
        args.json.write_text(
            json.dumps({"totals": summary, "rounds": [asdict(v) for v in verdicts]}, indent=2)
        )
    return 0 if summary["clean_rounds"] == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
