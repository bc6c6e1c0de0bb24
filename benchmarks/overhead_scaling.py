"""Per-trial overhead of a study at about 50, 500 and 5,000 trials (issue 54, item 4).

A study's decisions, reads and records cost something per trial on top of its training. Here
trials do not train: each one's outcome is simulated (steps to the target from a known model of
steps over batch size and learning rate, with noise; a trial that would need more than the
step limit does not reach it), so what is timed is everything else a trial of ``study run``
with ``allocation: {mode: steps}`` costs the process, done by the study's own code on a
journal storage and a SQLite MLflow store under a temporary directory:

- **decision**: the allocation's round (`RoundAllocator.next_round`: every batch size's trials
  read, the model of every trial fitted or kept, the plan, the round's claim and its state);
  **fits** the seconds of the model's fits among it (and in the designer's proposals);
- **claim**: the slot's claim (`Ledger.claim`, inside the engine's ``recent`` block);
- **proposal**: the stratum's history read and the lineup's proposal (TPE, the designer);
- **record**: the ledger's start and finish writes and the tuner's report;
- **MLflow**: the tracker's background thread (busy wall seconds) for the trial's run;
- **refit**: beyond `study.tuners.design.REFIT_ALL_BELOW` trials a fit is kept for a share of
  new trials (`REFIT_SHARE`), so the timed trials may make none: the first (untimed) decision,
  a fit afresh, divided by the trials a refit serves, is added per trial.

Times are the main thread's CPU seconds (the machine may be loaded) and wall seconds; "record"
includes handing the trial to MLflow's queue.

For each size N, a study of N finished trials (7 batch sizes, 16-1024) is written first,
with the allocation's state of N by-steps rounds as a run would have left it, and MLflow
runs (``--mlflow-prefill``, default up to 500); then ``--trials`` more trials (default 12)
run through the path above, the first ``--warmup`` (default 2) untimed. Prints a Markdown
table of the mean seconds per trial and writes ``results/overhead_scaling.json``.

Usage: python benchmarks/overhead_scaling.py [--sizes 50 500 5000] [--trials 12]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
BATCHES = (16, 32, 64, 128, 256, 512, 1024)
LIMIT = 5000
PARTS = ("decision", "fits", "refit", "claim", "proposal", "record", "mlflow")
REASON = (
    "a trial here narrows the answer's variance by 0.0123 (lr 0.0456, ~789 steps expected): the "
    "most for its share of the steps and of the 123 trials left, of the batch sizes that fit; "
    "12,345 steps left"
)


def study_yaml(per_stratum: int) -> str:
    """The MNIST-1D MLP question with ``per_stratum`` trials per batch size and a step budget
    that is never spent (the trials' count ends the study)."""
    return f"""\
name: overhead
workload: mnist1d
model: mlp
target: "val_accuracy>=0.6"
budget: {{max_steps: {LIMIT}}}
eval_every: "geometric:1.05"
optimizer: nesterov
seed: 0
trials_per_stratum: {per_stratum}
search_space:
  batch_size: {list(BATCHES)}
  learning_rate: {{low: 1.0e-3, high: 3.0, scale: log}}
  strategy: [default]
tuner: {{sampler: tpe, pruning: false}}
allocation: {{mode: steps, steps: 1000000000}}
"""


def simulated(batch: int, lr: float, rng: np.random.Generator) -> Any:
    """A trial's result: steps to the target ``300 (1 + 256 / B)`` at the best rate
    ``0.05 (B / 128) ** 0.5``, more away from it, lognormal noise; a curve evaluated on a
    geometric grid (ratio 1.05) up to where it reached the target or the step limit."""
    from study.results import Measurement, TrialResult, TrialState

    best = 0.05 * (batch / 128) ** 0.5
    steps = 300 * (1 + 256 / batch) * math.exp(0.8 * math.log(lr / best) ** 2)
    steps *= math.exp(rng.normal(0, 0.2))
    reached = steps <= LIMIT
    last = math.ceil(steps) if reached else LIMIT
    rows, step = [], 1
    while True:
        acc = min(0.9, 0.1 + 0.5 * step / steps)
        rows.append(
            Measurement(
                step=step,
                examples=step * batch,
                train_seconds=step * 1e-3,
                train_loss=2 * (1 - acc),
                metrics={"val_accuracy": acc, "val_loss": 2.2 * (1 - acc)},
            )
        )
        if step >= last:
            break
        step = min(last, max(step + 1, math.ceil(step * 1.05)))
    return TrialResult(
        state=TrialState.REACHED if reached else TrialState.NOT_REACHED,
        steps_run=last,
        examples_run=last * batch,
        train_seconds=last * 1e-3,
        steps_to_target=last if reached else None,
        examples_to_target=last * batch if reached else None,
        seconds_to_target=last * 1e-3 if reached else None,
        curve=tuple(rows),
    )


def prefill(ledger: Any, config: Any, n: int, rng: np.random.Generator) -> dict:
    """``n`` finished trials spread over the batch sizes, and the allocation's state and round
    claims of a by-steps run that made them; the budgets by stratum."""
    from study.config.space import Stratum
    from study.ledger import AllocationState, Decision, LedgerTrial

    budgets, decisions = {}, []
    for i, batch in enumerate(BATCHES):
        stratum = Stratum(batch, "default")
        count = n // len(BATCHES) + (1 if i < n % len(BATCHES) else 0)
        best = 0.05 * (batch / 128) ** 0.5
        trials = []
        for number in range(count):
            lr = float(np.clip(best * math.exp(rng.normal(0, 0.8)), 1e-3, 3.0))
            result = simulated(batch, lr, rng)
            trials.append(
                LedgerTrial(
                    stratum,
                    number,
                    result.state,
                    params={"learning_rate": lr},
                    result=result,
                    tuner="optuna",
                )
            )
        ledger.import_trials(stratum, trials)
        budgets[stratum] = count
        decisions.append(Decision(0, str(stratum), min(count, 4), "every batch size first"))
    rounds = max(0, n - 4 * len(BATCHES))
    for r in range(1, rounds + 1):
        decisions.append(Decision(r, str(Stratum(BATCHES[r % 7], "default")), 1, REASON))
        ledger.notes.claim_round(r)
    ledger.notes.set_allocation(
        AllocationState(
            config.total_trials, rounds, config.allocation.rounds, budgets, tuple(decisions)
        )
    )
    return budgets


def prefill_mlflow(uri: str, ledger: Any, config: Any, count: int) -> None:
    """MLflow runs of ``count`` of the study's trials, as the run logged them (by a tracker
    closed before the timed trials start)."""
    from study.tracking.study_tracker import StudyTracker

    tracker = StudyTracker(uri, config.name)
    tracker.ensure_parent({"trials": config.total_trials}, {})
    done = 0
    for stratum in ledger.strata():
        for trial in ledger.trials(stratum):
            if done >= count:
                break
            spec = config.trial_spec(stratum, trial.params, number=trial.number)
            tracker.start_trial(trial)
            tracker.finish_trial(trial, spec, trial.result)
            done += 1
    tracker.close(60.0)


def measure(n: int, trials: int, warmup: int, mlflow_prefill: int, seed: int) -> dict:
    """Mean seconds per trial of each part (see the module) after ``n`` trials."""
    import yaml

    from study.config.studyfile import parse_study
    from study.ext.allocation.rounds import RoundAllocator
    from study.ledger import Ledger, StudyRecord
    from study.phases import PHASES, Phase
    from study.runner.launch import fingerprint
    from study.runner.timings import timed
    from study.tracking.study_tracker import StudyTracker
    from study.tuners import design
    from study.tuners.history import read_history
    from study.tuners.objective import score
    from study.tuners.registry import build_lineup

    rng = np.random.default_rng(seed)
    per_stratum = math.ceil((n + trials) / len(BATCHES)) + 1
    text = study_yaml(per_stratum)
    config = parse_study(yaml.safe_load(text), "overhead.yaml", text=text)
    out: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(prefix="study-overhead-") as work:
        root = Path(work)
        ledger = Ledger.open(str(root / "optuna.journal"), config.name)
        ledger.create(
            StudyRecord(
                name=config.name,
                config_text=config.text,
                config_source="overhead.yaml",
                fingerprint=fingerprint(config),
                tuner="optuna",
                trials_total=config.total_trials,
                created=time.time(),
            )
        )
        started = time.perf_counter()
        prefill(ledger, config, n, rng)
        out["prefill_s"] = time.perf_counter() - started
        allocator = RoundAllocator(config, ledger, config.total_trials, say=lambda _line: None)
        budgets = allocator.begin(lambda: math.nan)
        lineup = build_lineup("optuna", config, ledger)
        uri = f"sqlite:///{root / 'mlflow.db'}"
        prefill_mlflow(uri, ledger, config, min(n, mlflow_prefill))
        tracker = StudyTracker(uri, config.name)
        tracker.ensure_parent({"trials": config.total_trials}, {})
        spent = {p: 0.0 for p in PARTS}
        cpu = {p: 0.0 for p in PARTS}
        assert warmup >= 1, "the first trial's decision (a fit afresh) is not timed"
        for i in range(warmup + trials):
            if i == warmup:
                spent = {p: 0.0 for p in PARTS}
                cpu = {p: 0.0 for p in PARTS}
                busy0, mlflow_cpu0 = tracker.busy_seconds, tracker.cpu_seconds
                fits0 = PHASES.seconds.get(Phase.FITS.value, 0.0)
            marks = [(time.perf_counter(), time.thread_time())]
            budgets = allocator.next_round() or budgets
            marks.append((time.perf_counter(), time.thread_time()))
            if i == 0:  # a fit afresh (nothing kept yet), as each refit is
                out["first_decision"] = {"wall": marks[1][0] - marks[0][0]}
                out["first_decision"]["cpu"] = marks[1][1] - marks[0][1]
            slot = None
            with ledger.recent():
                for stratum, budget in budgets.items():
                    if ledger.taken(stratum, budget) < budget:
                        slot = ledger.claim(stratum, budget, grace=60.0)
                        if slot is not None:
                            break
            assert slot is not None, "no slot: the allocation gave none"
            marks.append((time.perf_counter(), time.thread_time()))
            with ledger.recent():
                history = read_history(ledger, config, slot.stratum, budgets[slot.stratum])
                _backend, proposal = lineup.propose(slot, history)
                trial = ledger.start(slot, tuner=proposal.tuner, origin=proposal.origin)
            lr = float(proposal.params["learning_rate"])
            result = timed(simulated(slot.stratum.batch_size, lr, rng), time.perf_counter())
            objective = score(result, LIMIT, config.target)
            spec = config.trial_spec(slot.stratum, proposal.params, number=slot.number)
            marks.append((time.perf_counter(), time.thread_time()))
            trial = ledger.finish(slot, result, objective, target=config.target)
            tracker.start_trial(trial)
            tracker.finish_trial(trial, spec, result)
            marks.append((time.perf_counter(), time.thread_time()))
            for part, (a, b) in zip(
                ("decision", "claim", "proposal", "record"), itertools.pairwise(marks)
            ):
                spent[part] += b[0] - a[0]
                cpu[part] += b[1] - a[1]
        tracker.close(30.0)
        spent["mlflow"] = tracker.busy_seconds - busy0
        cpu["mlflow"] = tracker.cpu_seconds - mlflow_cpu0
        spent["fits"] = PHASES.seconds.get(Phase.FITS.value, 0.0) - fits0
        cpu["fits"] = math.nan  # the fits run in the decision's and proposal's thread
        lineup.close()
    out["wall"] = {p: s / trials for p, s in spent.items()}
    out["cpu"] = {p: s / trials for p, s in cpu.items()}
    # A refit comes once per `REFIT_SHARE` of the trials beyond `REFIT_ALL_BELOW` (the timed
    # trials may have none): its cost, the first decision's, is shared by that many trials.
    every = 1 if n <= design.REFIT_ALL_BELOW else math.ceil(design.REFIT_SHARE * n)
    out["refit_every"] = every
    for kind in ("wall", "cpu"):
        out[kind]["refit"] = 0.0 if every == 1 else out["first_decision"][kind] / every
        out[kind]["total"] = sum(out[kind][p] for p in PARTS if p != "fits")
    return out


def table(rows: list[dict], kind: str) -> str:
    """Mean milliseconds per trial of each part (``kind``: wall or cpu), and the total's ratio
    to the first row's."""
    head = f"| trials so far ({kind}) | " + " | ".join(PARTS) + " | total | x of the first |"
    lines = [head, "|" + "---|" * (len(PARTS) + 3)]
    first = rows[0][kind]["total"]
    for row in rows:
        cells = " | ".join(
            "-" if math.isnan(row[kind][p]) else f"{1000 * row[kind][p]:.1f}" for p in PARTS
        )
        total = row[kind]["total"]
        lines.append(f"| {row['n']:,} | {cells} | {1000 * total:.1f} | {total / first:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--mlflow-prefill", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "overhead_scaling.json")
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        row = measure(n, args.trials, args.warmup, args.mlflow_prefill, args.seed)
        row["load"] = round(os.getloadavg()[0], 2)
        print(json.dumps(row), flush=True)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows, "cpu"))
    print(table(rows, "wall"))


if __name__ == "__main__":
    main()
