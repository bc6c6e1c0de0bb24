"""Answer stability: do six runs of the same study give the same answer, and the true one?

Two questions, each a study file of the benchmarks:

- ``mlp-nesterov``: `benchmarks/mnist1d_compute.yaml` (MNIST-1D MLP to 60%, Nesterov);
- ``cnn-adam``: `benchmarks/mnist1d_cnn_adam.yaml` (MNIST-1D CNN to 80%, Adam).

**The truth** of a question is a dense exact grid: ``--rates`` learning rates (log-spaced over
the study's range) at every batch size, each trained to the target (the study's hold rule, exact
steps, no pruning) at training seeds 0, 1 and 2 (``--grid-seeds``), cached point by point in
``benchmarks/results/answer_stability_<question>_grid.json``. Pooled over seeds, the median
steps of each point (a point that failed at a seed counts as never reaching); the pooled curve
is the fewest median steps per batch size, and the pooled answers are those of the report's
analysis on it (B_noise and S_min of McCandlish et al.'s fit, alpha of the best rates, the end
of perfect scaling and the start of maximal data parallelism, the batch size for 8
accelerators).

**The runs**: ``--runs`` runs of the study file as a user runs it (``study run``), run k with
``seed: k`` (its trials draw their training seeds from it) and ``tuner.seed: k``; their answers
(`study.analysis.answers`) with intervals are cached in
``benchmarks/results/answer_stability_<question>_runs.json``.

Prints, per question, the truth, each run's answers and the issue's acceptance checks.

Usage: python benchmarks/answer_stability.py [--only grid|runs|report ...]
    [--questions mlp-nesterov cnn-adam] [--runs 6] [--rates 24] [--grid-seeds 0 1 2]
    [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUESTIONS = {
    "mlp-nesterov": HERE / "mnist1d_compute.yaml",
    "cnn-adam": HERE / "mnist1d_cnn_adam.yaml",
}
ACCELERATORS = 8


# ------------------------------------------------------------------------------- the truth


def grid_path(question: str) -> Path:
    return RESULTS / f"answer_stability_{question}_grid.json"


def run_grid(question: str, rates: int, seeds: list[int]) -> dict[str, Any]:
    """Every (seed, batch size, learning rate) of the grid trained to the target or the budget;
    cached point by point, so an interrupted grid continues where it stopped."""
    from study.config.space import Stratum
    from study.config.studyfile import load_study_file
    from study.runner.pool import WorkerPool

    config = load_study_file(QUESTIONS[question])
    lr = config.space.param("learning_rate")
    grid_rates = [float(x) for x in np.geomspace(lr.low, lr.high, rates)]
    cache = grid_path(question)
    done: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    points = done.setdefault("points", {})
    done.update(rates=grid_rates, seeds=seeds, file=QUESTIONS[question].name)
    started = time.perf_counter()
    with WorkerPool(1) as pool:
        for seed in seeds:
            for batch in config.space.batch_sizes:
                for rate in grid_rates:
                    key = f"{seed}/{batch}/{rate!r}"
                    if key in points:
                        continue
                    spec = config.trial_spec(
                        Stratum(batch, "default"), {"learning_rate": rate}, seed=seed
                    )
                    result = pool.run(spec)
                    points[key] = {
                        "seed": seed,
                        "batch_size": batch,
                        "learning_rate": rate,
                        "state": result.state.value,
                        "steps_to_target": result.steps_to_target,
                        "steps_run": result.steps_run,
                        "fell_back": result.fell_back,
                    }
                    cache.parent.mkdir(parents=True, exist_ok=True)
                    cache.write_text(json.dumps(done, indent=1))
                print(
                    f"  {question} grid seed {seed} b{batch}: "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    return done


def grid_trials(grid: dict[str, Any]):
    """The grid's points as a trial table (`trial_steps_to_target` columns)."""
    import pandas as pd

    rows = []
    for i, p in enumerate(grid["points"].values()):
        reached = p["steps_to_target"] is not None
        rows.append(
            {
                "trial": i,
                "batch_size": p["batch_size"],
                "learning_rate": p["learning_rate"],
                "seed": p["seed"],
                "state": "reached" if reached else p["state"],
                "steps_to_target": float(p["steps_to_target"]) if reached else math.nan,
                "steps_run": float(p["steps_run"]),
            }
        )
    return pd.DataFrame(rows)


def pooled_curve(grid: dict[str, Any]):
    """Per batch size: the fewest steps of the points' medians over seeds, and its rate."""
    import pandas as pd

    trials = grid_trials(grid)
    steps = trials["steps_to_target"].fillna(math.inf)
    medians = (
        trials.assign(steps=steps)
        .groupby(["batch_size", "learning_rate"])["steps"]
        .median()
        .reset_index()
    )
    rows = []
    for batch, group in medians.groupby("batch_size"):
        best = group.sort_values(["steps", "learning_rate"]).iloc[0]
        rates = sorted(group["learning_rate"])
        rows.append(
            {
                "batch_size": int(batch),
                "steps_to_result": float(best["steps"]),
                "best_learning_rate": float(best["learning_rate"]),
                "lr_on_edge": bool(best["learning_rate"] in (rates[0], rates[-1])),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=("grid", "runs", "report"))
    parser.add_argument("--questions", nargs="+", choices=tuple(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rates", type=int, default=24)
    parser.add_argument("--grid-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    phases = set(args.only or ("grid", "runs", "report"))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="answer-stability-"))
    for question in args.questions:
        if "grid" in phases:
            run_grid(question, args.rates, args.grid_seeds)
    del workdir


if __name__ == "__main__":
    main()
