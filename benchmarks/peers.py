"""`study run` against hand-written peers on the MNIST-1D MLP question, back to back in one process.

The question of ``benchmarks/mnist1d_compute.yaml`` (batch 16-1024, 8 trials per batch size: 56,
its target, budget and evaluation cadence). Each peer trains every trial with the study's own
trainer (a `study.runner.pool.WorkerPool`, ``config.trial_spec``: the same target, hold rule,
budget and cadence) and stops a trial once it has run the batch size's best steps so far (it
can no longer be the best: what the study's pruning does):

- **optuna**: Optuna's TPE over the learning rate, one study per batch size;
- **optuna-warm**: the same, batch sizes from small to large, each study's first trial at the
  previous batch size's best rate (enqueued) and its search range centred there (x/8 to x*8,
  within the file's range);
- **keras-tuner**: KerasTuner's Bayesian oracle over the learning rate, one per batch size;
- **study**: ``study run`` on the same question (a subprocess; its file's allocation by steps,
  or the even allocation when the batch sizes or trials are reduced);
- **study-w2**: the same with ``--workers 2``: two trials at once, one per core of a 2-core
  machine (the peers above run one trial at a time, as their loops are written);
- **by-hand**: the optuna-warm search, each trial trained as one writes it by hand without
  `study`'s trainer (`ByHand`): a fresh Keras model, ``model.fit`` with a callback that runs
  ``model.evaluate`` on the validation set at the study's cadence and stops at the first
  evaluation that meets the target (no hold rule, no exact steps) or at the batch size's best
  steps so far, each trial an MLflow run nested under the contestant's (its parameters, its
  steps and its evaluations in one batch, in a local SQLite store): the kind of peer the
  issue's table timed.

Each contestant runs as a whole process of its own, timed from its start to its exit, as the
issue's table measured them (``wall (whole process)``): Python's start, the imports, the trainer
worker's start with TensorFlow's import, the trials. With ``--in-process`` the peers run in
this process instead, one after the other, timed from their first proposal with the trainer's
server (TensorFlow imported) kept from the contestant before: only the first peer pays that
start, and ``study`` still runs as its own process.

Prints and writes (``results/peers.json``) per contestant: trials, training steps, wall seconds
and CPU seconds (the peer's process and its trainer workers; left out for ``study``, whose
workers are children of a forkserver no process waits for), how it was timed (``timed``:
``process`` or ``in-process``), and the whole machine's busy and idle CPU seconds while it ran
(``machine_busy``, ``machine_idle``: Linux's ``/proc/stat``, every process counted, the
forkserver's workers too; absent elsewhere). Busy plus idle is the wall times the cores: a
contestant whose idle is near 0 was bound by CPU, and no reordering of its work shortens it.

``--rounds N`` runs the contestants N times, one after the other in each round (``optuna-warm
study study-w2``, then again), as the issue's "one run each, back to back" does once; it prints
per round each ``study`` contestant's wall over the round's best peer's, their median and how
many rounds were at most 0.5x, and writes every row with its ``round``.

Usage: python benchmarks/peers.py [--trials-per-batch 8] [--batch-sizes 16 32 ...]
       [--only optuna study] [--in-process] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from study_bench import run_study

HERE = Path(__file__).resolve().parent
FILE = HERE / "mnist1d_compute.yaml"
CONTESTANTS = ("optuna", "optuna-warm", "keras-tuner", "study", "study-w2", "by-hand")


def cpu_seconds() -> tuple[float, float]:
    """CPU seconds of this process, and of its children that ended and were waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def machine_cpu() -> tuple[float, float] | None:
    """The whole machine's busy and idle CPU seconds since boot (Linux ``/proc/stat``: user,
    nice, system, irq and softirq; idle and iowait), or None where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(f) for f in fields[:7]]
    hertz = os.sysconf("SC_CLK_TCK")
    busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]
    return busy / hertz, (ticks[3] + ticks[4]) / hertz


def with_machine(row: dict[str, Any], before: tuple[float, float] | None) -> dict[str, Any]:
    """``row`` with the machine's busy and idle CPU seconds since ``before`` (`machine_cpu`)."""
    after = machine_cpu()
    if before is not None and after is not None:
        row["machine_busy"] = round(after[0] - before[0], 2)
        row["machine_idle"] = round(after[1] - before[1], 2)
    return row


def ratios(rows: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per ``study`` contestant, its wall over the best peer's of the same round, round by
    round (a round without a peer, or without that contestant, adds nothing)."""
    out: dict[str, list[float]] = {}
    for number in sorted({row.get("round", 1) for row in rows}):
        round_rows = [row for row in rows if row.get("round", 1) == number]
        peers = [row["wall"] for row in round_rows if not row["contestant"].startswith("study")]
        if not peers:
            continue
        for row in round_rows:
            if row["contestant"].startswith("study"):
                out.setdefault(row["contestant"], []).append(row["wall"] / min(peers))
    return out


def workers_cpu(pool: Any) -> float:
    """CPU seconds of the pool's live trainer workers so far (Linux ``/proc``; 0 elsewhere):
    a worker still running is no ended child of this process."""
    total = 0.0
    for pids in pool.pids().values():
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Trainer:
    """Trains one trial with the study's trainer, stopped at the batch size's best steps so
    far; keeps the totals."""

    def __init__(self, config: Any, pool: Any) -> None:
        self.config, self.pool = config, pool
        self.trials = 0
        self.steps = 0
        self.best: dict[int, tuple[float, float]] = {}  # batch: (steps, lr)

    def __call__(self, batch: int, lr: float, number: int) -> float:
        """Steps to the target (``inf`` when not reached) of one trial at ``(batch, lr)``."""
        import dataclasses

        from study.config.space import Stratum

        spec = self.config.trial_spec(
            Stratum(batch, "default"), {"learning_rate": lr}, number=number
        )
        best = self.best.get(batch, (math.inf, math.nan))[0]
        if math.isfinite(best):
            budget = spec.settings.budget
            limit = budget.step_limit(batch) or math.inf
            spec = spec.with_settings(
                budget=dataclasses.replace(budget, max_steps=int(min(limit, best)))
            )
        result = self.pool.run(spec)
        self.trials += 1
        self.steps += result.steps_run
        reached = result.steps_to_target
        if reached is not None and reached < best:
            self.best[batch] = (float(reached), lr)
        return float(reached) if reached is not None else math.inf


class ByHand:
    """`Trainer`'s interface, each trial trained without `study`'s trainer: Keras ``fit`` with a
    callback that evaluates at the study's cadence and stops at the first evaluation meeting the
    target (or at the batch size's best steps so far); each trial an MLflow run nested under
    ``parent``."""

    def __init__(self, config: Any, tracking: str, parent: str) -> None:
        from study.workloads import get_workload

        self.config, self.tracking, self.parent = config, tracking, parent
        spec = config.trial_spec(config.strata[0], {"learning_rate": 0.1})
        self.workload = get_workload(spec.workload, spec.workload_options)
        self.data = self.workload.load()
        self.trials = 0
        self.steps = 0
        self.best: dict[int, tuple[float, float]] = {}

    def __call__(self, batch: int, lr: float, number: int) -> float:
        import keras
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        from study.config.space import Stratum

        stratum = Stratum(batch, "default")
        spec = self.config.trial_spec(stratum, {"learning_rate": lr}, number=number)
        limit = spec.settings.budget.step_limit(batch) or 5000
        best = self.best.get(batch, (math.inf, math.nan))[0]
        limit = int(min(limit, best))
        keras.utils.set_random_seed(spec.settings.seed)
        data = self.data
        model = self.workload.build_model(spec.model, data)
        model.compile(
            optimizer=keras.optimizers.SGD(lr, momentum=spec.optimizer.momentum, nesterov=True),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        stop = stop_at_target(spec, limit, data.x_val, data.y_val)
        epochs = math.ceil(limit * batch / len(data.x_train)) + 1
        model.fit(
            data.x_train, data.y_train, batch_size=batch, epochs=epochs, shuffle=True,
            verbose=0, callbacks=[stop],
        )  # fmt: skip
        client = MlflowClient(self.tracking)
        experiment = client.get_run(self.parent).info.experiment_id
        run = client.create_run(experiment, tags={"mlflow.parentRunId": self.parent})
        now = int(time.time() * 1000)
        client.log_batch(
            run.info.run_id,
            metrics=[
                Metric(k, float(v), now, step) for step, metrics in stop.curve
                for k, v in metrics.items()
            ]
            + [Metric("steps_run", float(stop.step), now, 0)],
            params=[Param("learning_rate", repr(lr)), Param("batch_size", str(batch))],
        )  # fmt: skip
        client.set_terminated(run.info.run_id)
        self.trials += 1
        self.steps += stop.step
        if stop.reached is not None and stop.reached < best:
            self.best[batch] = (float(stop.reached), lr)
        return float(stop.reached) if stop.reached is not None else math.inf


def stop_at_target(spec: Any, limit: int, x_val: Any, y_val: Any) -> Any:
    """The callback one writes: evaluate at the cadence's steps, stop at the first that meets
    the target or at ``limit`` steps; keeps the evaluations (``curve``)."""
    import keras

    class StopAtTarget(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step, self.reached = 0, None
            self.next = spec.settings.cadence.next_step(0)
            self.curve: list[tuple[int, dict[str, float]]] = []

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step += 1
            if self.step >= limit:
                self.model.stop_training = True
            if self.step < self.next and self.step < limit:
                return
            out = self.model.evaluate(x_val, y_val, batch_size=len(x_val), verbose=0,
                                      return_dict=True)  # fmt: skip
            metrics = {"val_loss": float(out["loss"]), "val_accuracy": float(out["accuracy"])}
            self.curve.append((self.step, metrics))
            if spec.target.met_by(metrics):
                self.reached = self.step
                self.model.stop_training = True
            self.next = spec.settings.cadence.next_step(self.step)

    return StopAtTarget()


def run_by_hand(config: Any, sizes: list[int], per: int, low: float, high: float) -> ByHand:
    """The by-hand contestant: optuna-warm's search over `ByHand` trials, logged to MLflow."""
    import mlflow

    with tempfile.TemporaryDirectory(prefix="peers-by-hand-") as work:
        tracking = f"sqlite:///{work}/mlflow.db"
        mlflow.set_tracking_uri(tracking)
        mlflow.set_experiment("by-hand")
        with mlflow.start_run(run_name="by-hand") as parent:
            train = ByHand(config, tracking, parent.info.run_id)
            run_optuna(train, sizes, per, low, high, warm=True)  # type: ignore[arg-type]
    return train


def penalty(steps: float, limit: float) -> float:
    """A not-reached trial's value for a tuner: twice the step limit."""
    return steps if math.isfinite(steps) else 2.0 * limit


def run_optuna(train: Trainer, sizes: list[int], per: int, low: float, high: float, warm: bool):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    previous = math.nan
    for batch in sorted(sizes):
        lo, hi = low, high
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=batch))
        if warm and math.isfinite(previous):
            lo, hi = max(low, previous / 8), min(high, previous * 8)
            study.enqueue_trial({"learning_rate": previous})
        for number in range(per):
            trial = study.ask()
            lr = trial.suggest_float("learning_rate", lo, hi, log=True)
            study.tell(trial, penalty(train(batch, lr, number), 2 * 5000))
        previous = train.best.get(batch, (math.inf, previous))[1]


def run_keras_tuner(train: Trainer, sizes: list[int], per: int, low: float, high: float):
    import keras_tuner as kt

    with tempfile.TemporaryDirectory(prefix="peers-kt-") as work:
        for batch in sorted(sizes):
            space = kt.HyperParameters()
            space.Float("learning_rate", low, high, sampling="log")
            oracle = kt.oracles.BayesianOptimizationOracle(
                objective=kt.Objective("steps", "min"),
                max_trials=per,
                hyperparameters=space,
                seed=batch,
            )
            oracle._set_project_dir(work, f"b{batch}")
            for number in range(per):
                trial = oracle.create_trial("peers")
                if trial.status != "RUNNING":
                    break
                lr = float(trial.hyperparameters.get("learning_rate"))
                steps = penalty(train(batch, lr, number), 2 * 5000)
                oracle.update_trial(trial.trial_id, {"steps": steps})
                trial.status = "COMPLETED"
                oracle.end_trial(trial)


def run_study_contestant(
    data: dict, sizes: list[int], per: int, workers: int = 1
) -> dict[str, Any]:
    """``study run --workers N`` on the question, timed as a whole process; reduced (other
    batch sizes or trials), with the even allocation (the file's step budget is the whole
    question's)."""
    reduced = per != data["trials_per_stratum"] or sizes != data["search_space"]["batch_size"]
    data = {**data, "trials_per_stratum": per}
    data["search_space"] = {**data["search_space"], "batch_size": sizes}
    if reduced:
        data["allocation"] = {"mode": "even"}
    with tempfile.TemporaryDirectory(prefix="peers-study-") as work:
        file = Path(work) / "question.yaml"
        file.write_text(yaml.safe_dump(data, sort_keys=False))
        _, wall = run_study(file, Path(work), "--workers", str(workers))
        from study.ledger import Ledger

        journal = str(Path(work) / "mlruns" / "optuna.journal")
        ledger = Ledger.open(journal, data["name"], create=False)
        done = [t for s in ledger.strata() for t in ledger.trials(s) if t.result is not None]
    steps = sum(t.result.steps_run for t in done)
    return {"trials": len(done), "steps": steps, "wall": wall}  # the process's, not the reading


def contest(name: str, config: Any, data: dict, sizes: list[int], per: int) -> dict[str, Any]:
    """One contestant, timed (wall and CPU)."""
    from study.runner.pool import WorkerPool

    low = config.space.param("learning_rate").low
    high = config.space.param("learning_rate").high
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    row: dict[str, Any] = {"contestant": name}
    if name.startswith("study"):
        row.update(run_study_contestant(data, sizes, per, 2 if name == "study-w2" else 1))
        workers = 0.0
    elif name == "by-hand":  # no trainer workers: Keras trains in this process
        hand = run_by_hand(config, sizes, per, low, high)
        row.update(trials=hand.trials, steps=hand.steps)
        row["best"] = {str(b): s for b, (s, _) in sorted(hand.best.items())}
        workers = 0.0
    else:
        runs: dict[str, Callable[[Trainer], None]] = {
            "optuna": lambda t: run_optuna(t, sizes, per, low, high, warm=False),
            "optuna-warm": lambda t: run_optuna(t, sizes, per, low, high, warm=True),
            "keras-tuner": lambda t: run_keras_tuner(t, sizes, per, low, high),
        }
        with WorkerPool(1) as pool:
            train = Trainer(config, pool)
            runs[name](train)
            workers = workers_cpu(pool)
        row.update(trials=train.trials, steps=train.steps)
        row["best"] = {str(b): s for b, (s, _) in sorted(train.best.items())}
    row.setdefault("wall", time.perf_counter() - wall0)
    own, kids = (now - then for now, then in zip(cpu_seconds(), cpu0, strict=True))
    if name not in ("study", "study-w2", "by-hand"):  # the workers, unless counted already
        kids = max(kids, workers)
    row["cpu"] = own + kids
    row["load"] = round(os.getloadavg()[0], 2)
    return row


def as_process(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One peer in a process of its own (this script with ``--contestant``), its wall timed
    around the whole process."""
    command = [sys.executable, str(Path(__file__).resolve()), "--contestant", name]
    command += ["--trials-per-batch", str(args.trials_per_batch)]
    if args.batch_sizes:
        command += ["--batch-sizes", *map(str, args.batch_sizes)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{name} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row.update(wall=wall, load=round(os.getloadavg()[0], 2), timed="process")
    return row


def main() -> None:
    from study.config.studyfile import load_study_file, parse_study

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials-per-batch", type=int, default=8)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    parser.add_argument("--only", nargs="+", choices=CONTESTANTS, default=list(CONTESTANTS))
    parser.add_argument("--in-process", action="store_true", help="the peers in this process")
    parser.add_argument("--rounds", type=int, default=1, help="the contestants this many times")
    parser.add_argument("--contestant", choices=CONTESTANTS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "peers.json")
    args = parser.parse_args()
    data = yaml.safe_load(FILE.read_text())
    sizes = args.batch_sizes or list(data["search_space"]["batch_size"])
    base = load_study_file(FILE)
    mapping = {**data, "search_space": {**data["search_space"], "batch_size": sizes}}
    config = parse_study(mapping, str(FILE), text=base.text)
    if args.contestant:  # one contestant, in this process: its row on the last line
        print(json.dumps(contest(args.contestant, config, data, sizes, args.trials_per_batch)))
        return
    if args.rounds < 1:
        parser.error(f"--rounds: at least 1 (got {args.rounds})")
    rows = []
    for number in range(1, args.rounds + 1):
        for name in args.only:
            before = machine_cpu()
            if args.in_process or name.startswith("study"):  # `study run` is a process anyway
                row = {**contest(name, config, data, sizes, args.trials_per_batch)}
                row["timed"] = "process" if name.startswith("study") else "in-process"
            else:
                row = as_process(name, args)
            row = with_machine(row, before)
            if args.rounds > 1:
                row["round"] = number
            print(json.dumps(row), flush=True)
            rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(
        "| round | contestant | trials | training steps | wall (s) | CPU (s) | machine busy / idle (s) |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        cpu = f"{row['cpu']:.1f}" if "cpu" in row else "-"
        machine = (
            f"{row['machine_busy']:.1f} / {row['machine_idle']:.1f}"
            if "machine_busy" in row
            else "-"
        )
        print(
            f"| {row.get('round', 1)} | {row['contestant']} | {row['trials']} | "
            f"{row['steps']:,} | {row['wall']:.1f} | {cpu} | {machine} |"
        )
    for name, values in ratios(rows).items():
        shown = ", ".join(f"{v:.2f}x" for v in values)
        print(
            f"{name}: {shown} the round's best peer (median {statistics.median(values):.2f}x; "
            f"{sum(v <= 0.5 for v in values)} of {len(values)} rounds at most 0.5x)"
        )


if __name__ == "__main__":
    main()
