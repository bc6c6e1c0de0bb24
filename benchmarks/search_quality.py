"""Search quality: how close the study's best steps to target come to a dense grid (MNIST-1D MLP).

The question of `benchmarks/mnist1d_compute.yaml`: an MLP on MNIST-1D to 60% validation
accuracy, batch sizes 16 to 1024, 8 trials per batch size. Truth: a dense grid of 16 learning
rates (log-spaced over the study's range) per batch size, each trained to the target at the
study's seed; its fewest steps per batch size is the truth (cached in ``<out>_grid.json``, so
reruns only run the searches). Compared on that truth:

- ``study``: `study run` with both tuners (joint search, learning-rate guide, pruning), three
  tuner seeds (``tuner.seed``), without and with confirmation trials (``tuner.confirm``);
- ``optuna``: plain Optuna (TPE) per batch size: ``--tuner optuna`` with ``tuner.transfer:
  false`` (no knowledge shared between batch sizes), the same three seeds.

Per batch size: the gap of the best steps found (at the study's seed) to the grid's, the total
training steps and the wall time of each run; per run the fitted B_noise (with confirmation, on
the median over seeds). Prints tables and writes everything to ``<out>.json``.

Usage: python benchmarks/search_quality.py [--out benchmarks/results/search_quality]
    [--seeds 0 1 2] [--only grid|study|optuna|confirm ...] [--workdir DIR] [--resume]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
STUDY_FILE = HERE / "mnist1d_compute.yaml"
GRID_POINTS = 16
#: The confirmation setting of the ``confirm`` runs.
CONFIRM = {"top": 2, "seeds": 2}
RUNS = ("study", "confirm", "optuna")


# ------------------------------------------------------------------------------- the truth


def run_grid(config: Any, cache: Path) -> dict[str, Any]:
    """Every (batch size, learning rate) of the grid trained to the target (or the budget) at
    the study's seed; cached in ``cache`` by batch size and rate."""
    from study.config.space import Stratum
    from study.runner.pool import WorkerPool

    lr = config.space.param("learning_rate")
    rates = [float(x) for x in np.geomspace(lr.low, lr.high, GRID_POINTS)]
    done: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    points = done.setdefault("points", {})
    done["rates"] = rates
    with WorkerPool(1) as pool:
        for batch in config.space.batch_sizes:
            for rate in rates:
                key = f"{batch}/{rate!r}"
                if key in points:
                    continue
                spec = config.trial_spec(Stratum(batch, "default"), {"learning_rate": rate})
                started = time.perf_counter()
                result = pool.run(spec)
                points[key] = {
                    "batch_size": batch,
                    "learning_rate": rate,
                    "state": result.state.value,
                    "steps_to_target": result.steps_to_target,
                    "steps_run": result.steps_run,
                    "seconds": time.perf_counter() - started,
                }
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(done, indent=1))
            best = grid_best(done, batch)
            print(f"  grid b{batch}: best {best[0]} steps at lr {best[1]:.4g}", flush=True)
    return done


def grid_best(grid: dict[str, Any], batch: int) -> tuple[float, float]:
    """The grid's fewest steps to target at ``batch`` and its learning rate."""
    reached = [
        (p["steps_to_target"], p["learning_rate"])
        for p in grid["points"].values()
        if p["batch_size"] == batch and p["steps_to_target"] is not None
    ]
    return min(reached) if reached else (math.inf, math.nan)


# ------------------------------------------------------------------------------- the searches


def study_file(base: dict[str, Any], run: str, seed: int) -> dict[str, Any]:
    """The benchmark's study file for one run kind and tuner seed."""
    data = copy.deepcopy(base)
    data["name"] = f"quality-{run}-{seed}"
    data["allocation"] = {"mode": "even"}  # 8 trials per batch size (the file states a budget)
    tuner = dict(data.get("tuner") or {})
    tuner["seed"] = seed
    if run == "confirm":
        tuner["confirm"] = dict(CONFIRM)
    if run == "optuna":
        tuner["transfer"] = False
    data["tuner"] = tuner
    return data


def run_search(base: dict[str, Any], run: str, seed: int, workdir: Path) -> dict[str, Any]:
    """Run one study in its own directory (a ``study run`` process) and read its ledger."""
    data = study_file(base, run, seed)
    cwd = workdir / data["name"]
    cwd.mkdir(parents=True, exist_ok=True)
    file = cwd / "study.yaml"
    file.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "STUDY_HOME")}
    tuner = "optuna" if run == "optuna" else "both"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "study", "run", str(file), "--tuner", tuner],
        cwd=cwd,
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{data['name']} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"run": run, "seed": seed, "wall_seconds": wall, **read_ledger(cwd, data)}


def read_ledger(cwd: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Per batch size: best steps at the study's seed, steps and wall time spent, and the
    robust estimate; the fitted B_noise; duplicates (same point twice in a stratum)."""
    from study.analysis.crossings import trial_crossings
    from study.analysis.load import ledger_table
    from study.analysis.measures import summarize_trials
    from study.analysis.noise_scale import fit_noise_scale_from_trials
    from study.config.space import Stratum
    from study.config.target import Target
    from study.ledger import Ledger
    from study.tuners.points import clashes, point_of

    ledger = Ledger.open(str(cwd / "mlruns" / "optuna.journal"), data["name"])
    target = Target.parse(data["target"])
    per: dict[int, dict[str, Any]] = {}
    duplicates = 0
    for batch in data["search_space"]["batch_size"]:
        trials = [t for t in ledger.trials(Stratum(batch, "default")) if t.result is not None]
        base = [t for t in trials if "seed" not in t.extras]
        steps = [t.steps_to_target for t in base if t.steps_to_target is not None]
        best = min(base, key=lambda t: t.rank())
        seen: list[dict[str, Any]] = []
        for t in trials:
            point = point_of(dict(t.params), t.extras.get("seed"))
            duplicates += clashes(point, seen)
            seen.append(point)
        per[batch] = {
            "best_steps": min(steps) if steps else math.inf,
            "best_learning_rate": best.learning_rate if steps else math.nan,
            "trials": len(trials),
            "steps": sum(t.result.steps_run for t in trials),
            "seconds": sum(t.result.timings.get("wall", 0.0) for t in trials),
        }
    table = ledger_table(data["name"], ledger.measurement_rows())
    crossings = trial_crossings(table, target)
    robust = summarize_trials(crossings).set_index("batch_size")
    for batch, row in per.items():
        row["robust_steps"] = float(robust.loc[batch, "steps_to_result"])
        row["robust_low"] = float(robust.loc[batch, "steps_low"])
        row["robust_high"] = float(robust.loc[batch, "steps_high"])
        row["seeds"] = int(robust.loc[batch, "seeds"])
    fit = fit_noise_scale_from_trials(crossings, intervals=False)
    return {
        "batch_sizes": {str(b): row for b, row in per.items()},
        "total_steps": sum(row["steps"] for row in per.values()),
        "b_noise": fit.b_noise if fit.ok else math.nan,
        "duplicates": duplicates,
    }


# ------------------------------------------------------------------------------- the report


def gaps(result: dict[str, Any], grid: dict[str, Any]) -> dict[int, float]:
    """Per batch size: best steps found / the grid's best - 1."""
    out = {}
    for batch, row in result["batch_sizes"].items():
        truth = grid_best(grid, int(batch))[0]
        out[int(batch)] = row["best_steps"] / truth - 1.0
    return out


def summary(results: list[dict[str, Any]], grid: dict[str, Any]) -> dict[str, Any]:
    """Mean and worst gap, steps, wall time and B_noise per run kind over its seeds."""
    out: dict[str, Any] = {}
    for run in RUNS:
        mine = [r for r in results if r["run"] == run]
        if not mine:
            continue
        all_gaps = [g for r in mine for g in gaps(r, grid).values()]
        per_batch: dict[int, list[float]] = {}
        for r in mine:
            for batch, g in gaps(r, grid).items():
                per_batch.setdefault(batch, []).append(g)
        out[run] = {
            "mean_gap": statistics.fmean(all_gaps),
            "worst_gap": max(all_gaps),
            "mean_gap_by_batch": {b: statistics.fmean(v) for b, v in sorted(per_batch.items())},
            "worst_gap_by_batch": {b: max(v) for b, v in sorted(per_batch.items())},
            "total_steps": [r["total_steps"] for r in mine],
            "wall_seconds": [round(r["wall_seconds"], 1) for r in mine],
            "b_noise": [round(r["b_noise"], 1) for r in mine],
            "duplicates": sum(r["duplicates"] for r in mine),
        }
    return out


def print_tables(results: list[dict[str, Any]], grid: dict[str, Any]) -> None:
    batches = sorted(int(b) for b in results[0]["batch_sizes"])
    truth = {b: grid_best(grid, b) for b in batches}
    print("\nbatch size        " + "".join(f"{b:>8}" for b in batches))
    print("grid best steps   " + "".join(f"{truth[b][0]:>8.0f}" for b in batches))
    print("grid best lr      " + "".join(f"{truth[b][1]:>8.3g}" for b in batches))
    for r in results:
        label = f"{r['run']}/{r['seed']}"
        rows = r["batch_sizes"]
        g = gaps(r, grid)
        print(f"{label:<18}" + "".join(f"{rows[str(b)]['best_steps']:>8.0f}" for b in batches))
        print(f"{'  gap':<18}" + "".join(f"{g[b]:>8.1%}" for b in batches))
        print(
            f"{'  lr':<18}"
            + "".join(f"{rows[str(b)]['best_learning_rate']:>8.3g}" for b in batches)
        )
        print(f"{'  steps spent':<18}" + "".join(f"{rows[str(b)]['steps']:>8}" for b in batches))
        print(f"{'  seconds':<18}" + "".join(f"{rows[str(b)]['seconds']:>8.1f}" for b in batches))
        if r["run"] == "confirm":
            print(
                f"{'  median (spread)':<18}"
                + "".join(f"{rows[str(b)]['robust_steps']:>8.0f}" for b in batches)
            )
            print(
                f"{'    low-high':<18}"
                + "".join(
                    f"{rows[str(b)]['robust_low']:>4.0f}-{rows[str(b)]['robust_high']:<3.0f}"
                    for b in batches
                )
            )
        print(
            f"{'  total':<18}{r['total_steps']} steps, {r['wall_seconds']:.0f} s, "
            f"B_noise {r['b_noise']:.0f}, duplicates {r['duplicates']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "search_quality"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", choices=("grid", *RUNS), default=None)
    parser.add_argument("--workdir", help="where the studies' stores go (default: a temporary one)")
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs already in <out>.json, run the rest"
    )
    args = parser.parse_args()
    from study.config.studyfile import load_study_file

    config = load_study_file(STUDY_FILE)
    base = yaml.safe_load(STUDY_FILE.read_text())
    out = Path(args.out).resolve()
    grid = run_grid(config, out.with_name(out.name + "_grid.json"))
    runs = [r for r in RUNS if args.only is None or r in args.only]
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="search-quality-"))
    results_file = out.with_name(out.name + ".json")
    results: list[dict[str, Any]] = []
    if args.resume and results_file.exists():
        results = json.loads(results_file.read_text())["results"]
    for seed in args.seeds:
        for run in runs:
            if any(r["run"] == run and r["seed"] == seed for r in results):
                continue
            result = run_search(base, run, seed, workdir)
            results.append(result)
            g = gaps(result, grid)
            print(
                f"{run}/{seed}: mean gap {statistics.fmean(g.values()):.1%}, worst "
                f"{max(g.values()):.1%}, {result['total_steps']} steps, "
                f"{result['wall_seconds']:.0f} s, B_noise {result['b_noise']:.0f}",
                flush=True,
            )
            results_file.write_text(json.dumps({"results": results}, indent=1, default=str))
    if not results:
        return
    print_tables(results, grid)
    overview = summary(results, grid)
    results_file.write_text(
        json.dumps({"summary": overview, "results": results}, indent=1, default=str)
    )
    print(json.dumps(overview, indent=2, default=str))


if __name__ == "__main__":
    main()
