"""Answer stability: do six runs of the same study give the same answer, and the true one?

Two questions, each a study file of the benchmarks:

- ``mlp-nesterov``: `benchmarks/mnist1d_compute.yaml` (MNIST-1D MLP to 60%, Nesterov);
- ``cnn-adam``: `benchmarks/mnist1d_cnn_adam.yaml` (MNIST-1D CNN to 80%, Adam).

**The truth** of a question is a dense exact grid: ``--rates`` learning rates (log-spaced over
the study's range) at every batch size, each trained to the target (the study's hold rule, exact
steps; a point is stopped at `STOP_AFTER` times its seed's and batch size's best so far and
counts as "more than N steps") at training seeds 0, 1 and 2 (``--grid-seeds``), cached point by
point in
``benchmarks/results/answer_stability_<question>_grid.json``. The pooled truth is the model of
every trial (`study.analysis.answers`) fitted to all the grid's trials of the three seeds
together: B_noise, S_min, alpha, the end of perfect scaling, the start of maximal data
parallelism and the batch size for 8 accelerators. Printed next to it, the issue's other
reading: per point the median steps over seeds, per batch size the fewest of those medians,
and the best-trial analysis of a report on that curve.

**The runs**: ``--runs`` runs of the study file as a user runs it (``study run``), run k with
``seed: k`` (its trials draw their training seeds from it) and ``tuner.seed: k``; each run's
measurement table is cached in ``benchmarks/results/answer_stability/`` (its wall time and
training steps in ``answer_stability_<question>_runs.json``), and the report phase reads the
answers from the tables with the analysis as it is. Each question file allocates by
training steps (``allocation: {mode: steps, steps: N}``: 21,000 for the MLP question, the ~21k
its studies trained before the hold rule; 16,000 for the CNN question); ``--allocation even``
runs (and reads) the same file with ``allocation: {mode: even}`` instead (8 trials per batch
size), cached apart (the file's runs: ``..._steps_runs.json``, ``<question>_steps_run<k>.csv.gz``,
the summary in ``answer_stability_steps.json``; the even runs without the ``steps`` tag).

Prints, per question, the truth, each run's answers and the issue's acceptance checks.
``--keep-trials 16=5,32=5`` reads only each run's first trials at those batch sizes (with their
training steps): what fewer trials where a trial costs most would have answered, had the runs'
other proposals not changed; ``--stop-slower 2`` reads each run with every trial cut where its
own validation curve fell twice behind its batch size's best so far (`stop_slower`). Neither
is written to the cached summary.

Usage: python benchmarks/answer_stability.py [--only grid|runs|report ...]
    [--questions mlp-nesterov cnn-adam] [--runs 6] [--rates 24] [--grid-seeds 0 1 2]
    [--workdir DIR] [--keep-trials B=N,...] [--stop-slower K] [--allocation steps|even]
    [--workers 2]

``--workers 2`` runs every study with two trials at once (``study run --workers 2``), cached apart
(``_w2``).
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
#: A grid point is stopped once it has run this many times the fewest steps to target of its
#: (seed, batch size) so far (the rates run from the highest down): it counts as "more than N
#: steps" (censored), as a pruned trial does, and costs no more.
STOP_AFTER = 3.0
RUN_ANSWERS = (
    "b_noise", "s_min", "alpha", "perfect_end", "max_parallel_start", "recommended_batch",
    "critical_batch",
)  # fmt: skip


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
                for rate in sorted(grid_rates, reverse=True):  # fast divergence first
                    key = f"{seed}/{batch}/{rate!r}"
                    if key in points:
                        continue
                    spec = config.trial_spec(
                        Stratum(batch, "default"), {"learning_rate": rate}, seed=seed
                    )
                    bound = STOP_AFTER * _best(points, seed, batch)
                    result = pool.run(spec, lambda m, bound=bound: m.step < bound)
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


def _best(points: dict[str, Any], seed: int, batch: int) -> float:
    """The fewest steps to target of the grid's points so far at ``(seed, batch)``."""
    found = [
        p["steps_to_target"]
        for p in points.values()
        if p["seed"] == seed and p["batch_size"] == batch and p["steps_to_target"] is not None
    ]
    return float(min(found)) if found else math.inf


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


def complete(grid: dict[str, Any]) -> dict[str, Any]:
    """The grid with only the seeds that ran every (batch size, rate) point."""
    count: dict[int, int] = {}
    for p in grid["points"].values():
        count[p["seed"]] = count.get(p["seed"], 0) + 1
    full = max(count.values(), default=0)
    seeds = sorted(s for s, n in count.items() if n == full)
    points = {k: p for k, p in grid["points"].items() if p["seed"] in seeds}
    return {**grid, "points": points, "seeds": seeds}


def pooled_truth(grid: dict[str, Any]) -> dict[str, Any]:
    """The report's analysis on the pooled curve: B_noise and S_min, alpha (best rates on the
    edge of the range left out while three batch sizes remain), the regimes, the batch size
    for `ACCELERATORS`; and, for comparison, the model of every trial fitted to the grid."""
    from study.analysis.answers import scaling_answers
    from study.analysis.lr_scaling import fit_lr_power_law
    from study.analysis.noise_scale import fit_noise_scale
    from study.analysis.recommend import recommend
    from study.analysis.regimes import scaling_regimes
    from study.analysis.surrogate import LAST_STEP, fit_surrogate

    curve = pooled_curve(grid)
    reached = curve[np.isfinite(curve["steps_to_result"])]
    fit = fit_noise_scale(reached["batch_size"], reached["steps_to_result"])
    inner = reached[~reached["lr_on_edge"]]
    rates = inner if len(inner) >= 3 else reached
    lr = fit_lr_power_law(rates["batch_size"], rates["best_learning_rate"])
    regimes = scaling_regimes(curve)
    rec = recommend(curve, fit, None, ACCELERATORS)
    trials = grid_trials(grid).rename(columns={"steps_run": LAST_STEP})
    model = scaling_answers(fit_surrogate(trials), accelerators=ACCELERATORS)
    return {
        "curve": curve.to_dict("records"),
        "b_noise": model.b_noise.estimate,
        "s_min": model.s_min.estimate,
        "alpha": model.alpha.estimate,
        "perfect_end": model.perfect_end.estimate,
        "max_parallel_start": model.max_parallel_start.estimate,
        "recommended_batch": model.recommended_batch.estimate,
        "model_intervals": {a_.name: [a_.estimate, a_.low, a_.high] for a_ in model.items()},
        "grid_steps": int(sum(p["steps_run"] for p in grid["points"].values())),
        "best_of_medians": {
            "b_noise": fit.b_noise,
            "s_min": fit.s_min,
            "alpha": lr.alpha,
            "perfect_end": float(regimes.perfect_end),
            "max_parallel_start": (
                math.inf
                if regimes.max_parallel_start is None
                else float(regimes.max_parallel_start)
            ),
            "recommended_batch": float(rec.batch_size) if rec.ok else math.nan,
        },
    }


def runs_path(question: str, allocation: str = "steps", workers: int = 1) -> Path:
    tag = ("" if allocation == "even" else f"_{allocation}") + _workers_tag(workers)
    return RESULTS / f"answer_stability_{question}{tag}_runs.json"


def table_path(question: str, k: int, allocation: str = "steps", workers: int = 1) -> Path:
    tag = ("" if allocation == "even" else f"{allocation}_") + _workers_tag(workers, "_")
    return RESULTS / "answer_stability" / f"{question}_{tag}run{k}.csv.gz"


def _workers_tag(workers: int, after: str = "") -> str:
    """``w2`` for runs with two workers (nothing for one): their caches stand apart."""
    if workers == 1:
        return ""
    return f"w{workers}{after}" if after else f"_w{workers}"


def allocation_of(allocation: str) -> dict[str, Any]:
    """The study-file keys a run changes: none for ``steps`` (the question file as it is, its
    budget of training steps stated); for ``even``, ``allocation: {mode: even}``."""
    if allocation == "steps":
        return {}
    return {"allocation": {"mode": "even"}}


def run_studies(
    question: str,
    runs: int,
    workdir: Path,
    allocation: str = "steps",
    first: int = 0,
    workers: int = 1,
) -> dict[str, Any]:
    """Runs ``first`` to ``runs - 1`` of the question's study file (run k: ``seed: k``,
    ``tuner.seed: k``, and the keys of `allocation_of`); each run's measurement table is cached
    (`table_path`) with its wall time and training steps, so the answers are read again by the
    report phase with the analysis of the day. Two processes may run disjoint runs of one
    question at once (``--first``): each adds its own runs to the cache as it writes it.
    ``workers``: ``study run --workers`` (runs with more than one are cached apart)."""
    import yaml
    from study_bench import run_variant

    cache = runs_path(question, allocation, workers)
    done: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    file = QUESTIONS[question]
    base = yaml.safe_load(file.read_text())
    for k in range(first, runs):
        table = table_path(question, k, allocation, workers)
        if str(k) in done and table.exists():
            continue
        started = time.perf_counter()
        name = f"{base['name']}-run{k}"
        if not (workdir / "mlruns" / "optuna.journal").exists() or str(k) not in done:
            name = run_variant(
                file,
                workdir,
                f"run{k}",
                seed=k,
                tuner={**base["tuner"], "seed": k},
                flags=("--workers", str(workers)),
                **allocation_of(allocation),
            )
            done[str(k)] = {"wall_seconds": time.perf_counter() - started}
        done[str(k)]["training_steps"] = save_run(workdir, name, table)
        cache.parent.mkdir(parents=True, exist_ok=True)
        others = json.loads(cache.read_text()) if cache.exists() else {}
        cache.write_text(json.dumps({**others, str(k): done[str(k)]}, indent=1))
        print(f"  {question} run {k}: {done[str(k)]['wall_seconds']:.0f} s", flush=True)
    return done


def save_run(workdir: Path, name: str, path: Path) -> int:
    """Write run ``name``'s measurement table to ``path``; return its training steps."""
    from study.analysis.load import ledger_table
    from study.analysis.table import flatten_table
    from study.ledger import Ledger

    ledger = Ledger.open(str(workdir / "mlruns" / "optuna.journal"), name, create=False)
    table = flatten_table(ledger_table(name, ledger.measurement_rows()))
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False, compression="gzip")
    return sum(t.result.steps_run for s in ledger.strata() for t in ledger.trials(s) if t.result)


def first_trials(table: Any, keep: dict[int, int]) -> Any:
    """``table`` with only the first ``keep[B]`` trials (in the order the run made them) of
    each batch size B named in ``keep``: what a run that gave those sizes fewer trials would
    have measured, had its other proposals not changed."""
    if not keep:
        return table
    limit = table["batch_size"].map(lambda b: keep.get(int(b), math.inf))
    return table[table["stratum_trial"] < limit]


#: `stop_slower` judges a trial only once it has run this share of the stratum's best steps
#: (the first evaluations of any two trials are too close to call).
SLOWER_FROM = 0.2


def stop_slower(table: Any, target: Any, factor: float) -> Any:
    """``table`` with each trial cut where its own validation curve had fallen ``factor``
    times behind its batch size's best so far (in the order the run made them): at step t,
    having run at least `SLOWER_FROM` of the best's steps, its best metric so far was first
    reached by the best trial before step ``t / factor``. A cut trial ends there as pruned
    ("more than t steps"). What stopping trials on their own curves would have measured, had
    the later proposals not changed."""
    import numpy as np
    import pandas as pd

    from study.analysis.measures import trial_steps_to_target

    reached = trial_steps_to_target(table, target).set_index("trial")
    sign = 1.0 if target.maximize else -1.0
    kept = []
    for _, stratum in table.groupby("batch_size"):
        best: tuple[float, np.ndarray, np.ndarray] | None = None  # steps, curve steps, progress
        order = stratum.groupby("trial")["stratum_trial"].first().sort_values().index
        for trial in order:
            curve = stratum[stratum["trial"] == trial].sort_values("step")
            steps = float(reached.loc[trial, "steps_to_target"])
            hit = bool(reached.loc[trial, "reached"])
            progress = np.maximum.accumulate(sign * curve[target.metric].to_numpy(float))
            cut = None
            for t, p in zip(curve["step"].to_numpy(float), progress, strict=True):
                if best is None or (hit and t >= steps) or t >= best[0]:
                    break
                ahead = np.nonzero(best[2] >= p)[0]
                if t >= SLOWER_FROM * best[0] and ahead.size and t > factor * best[1][ahead[0]]:
                    cut = t
                    break
            if cut is not None:
                curve = curve[curve["step"] <= cut].assign(state="pruned")
                hit = False
            kept.append(curve)
            if hit and (best is None or steps < best[0]):
                upto = curve[curve["step"] <= steps]
                best = (steps, upto["step"].to_numpy(float), progress[: len(upto)])
    return pd.concat(kept).sort_index()


def trial_steps(table: Any) -> int:
    """The training steps of a run's table: each trial's last step, summed."""
    return int(table.groupby("trial")["step"].max().sum())


def analyse_run(
    question: str,
    k: int,
    meta: dict[str, Any],
    keep: dict[int, int] | None = None,
    slower: float | None = None,
    allocation: str = "steps",
    workers: int = 1,
) -> dict[str, Any]:
    """Run k's answers (the model of every trial) and its best-trial B_noise, from its table
    (only its first trials at the batch sizes of ``keep``, and trials cut where they fell
    ``slower`` times behind their batch size's best (`stop_slower`), with their steps, when
    given)."""
    import pandas as pd

    from study.analysis.answers import study_answers
    from study.analysis.crossings import trial_crossings
    from study.analysis.noise_scale import fit_noise_scale_from_trials
    from study.config.studyfile import load_study_file

    target = load_study_file(QUESTIONS[question]).target
    table = pd.read_csv(table_path(question, k, allocation, workers))
    if keep:
        table = first_trials(table, keep)
    if slower:
        table = stop_slower(table, target, slower)
    if keep or slower:
        meta = {**meta, "training_steps": trial_steps(table)}
    answers = study_answers(table, target, accelerators=ACCELERATORS)
    best = fit_noise_scale_from_trials(trial_crossings(table, target))
    return {
        **meta,
        "answers": {
            n: [getattr(answers, n).estimate, getattr(answers, n).low, getattr(answers, n).high]
            for n in RUN_ANSWERS
            if getattr(answers, n) is not None
        },
        "reason": "" if answers.ok else answers.surrogate.reason,
        "lr_shape": answers.surrogate.shape if answers.ok else "",
        "misfits": bool(answers.surrogate.misfits) if answers.ok else None,
        "best_trial_b_noise": best.b_noise if best.ok else math.nan,
    }


def report(question: str, truth: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Print the truth, every run's answers and the acceptance checks; return the checks."""
    print(f"\n## {question}: pooled truth over {len(GRID_SEEDS_USED)} training seeds")
    print(
        f"B_noise {truth['b_noise']:.0f}, alpha {truth['alpha']:.2f}, perfect scaling to "
        f"{truth['perfect_end']:g}, maximal from {truth['max_parallel_start']:g}, batch for "
        f"{ACCELERATORS}: {truth['recommended_batch']:g} (grid: {truth['grid_steps']:,} steps)"
    )
    print("\n| run | B_noise (95%) | alpha | perfect scaling ends | maximal from | batch for 8 "
          "| steps | best-trial B_noise |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for k, r in enumerate(runs):
        a = r["answers"]
        if "b_noise" not in a:  # the model could not be fitted: a run with no answer
            cells = [f"no answer ({r.get('reason', '')})", "-", "-", "-", "-"]
            cells += [f"{r['training_steps']:,}", f"{r['best_trial_b_noise']:.0f}"]
            print(f"| {k} | " + " | ".join(cells) + " |")
            continue
        cells = [f"{a['b_noise'][0]:.0f} ({a['b_noise'][1]:.0f}-{a['b_noise'][2]:.0f})"]
        cells.append(f"{a['alpha'][0]:.2f} ({a['alpha'][1]:.2f}-{a['alpha'][2]:.2f})")
        for key in ("perfect_end", "max_parallel_start", "recommended_batch"):
            v = a.get(key)
            cells.append("-" if v is None else f"{v[0]:g} ({v[1]:g}-{v[2]:g})")
        cells += [f"{r['training_steps']:,}", f"{r['best_trial_b_noise']:.0f}"]
        print(f"| {k} | " + " | ".join(cells) + " |")

    def covers(r: dict[str, Any], key: str) -> bool:
        v = r["answers"].get(key)
        return v is not None and v[1] <= truth[key] <= v[2]

    estimates = [r["answers"]["b_noise"][0] for r in runs if "b_noise" in r["answers"]]
    checks = {
        "answered": len(estimates),
        "b_noise_covered": sum(covers(r, "b_noise") for r in runs),
        "b_noise_ratio": max(estimates) / min(estimates) if estimates else math.nan,
        "alpha_within_0.15": sum(
            "alpha" in r["answers"] and abs(r["answers"]["alpha"][0] - truth["alpha"]) <= 0.15
            for r in runs
        ),
        "alpha_covered": sum(covers(r, "alpha") for r in runs),
        "perfect_end_covered": sum(covers(r, "perfect_end") for r in runs),
        "max_parallel_start_covered": sum(covers(r, "max_parallel_start") for r in runs),
        "recommended_batch_ok": sum(
            r["answers"].get("recommended_batch", [None])[0] == truth["recommended_batch"]
            or covers(r, "recommended_batch")
            for r in runs
        ),
        "median_training_steps": float(np.median([r["training_steps"] for r in runs])),
        "runs": len(runs),
    }
    print(
        "\n"
        + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in checks.items()
        )
    )
    return checks


GRID_SEEDS_USED: list[int] = []


def keep_trials(text: str) -> dict[int, int]:
    """``16=5,32=5`` as ``{16: 5, 32: 5}`` (`--keep-trials`)."""
    out = {}
    for item in text.split(","):
        size, sep, count = item.partition("=")
        if not (sep and size.strip().isdigit() and count.strip().isdigit() and int(count) > 0):
            raise argparse.ArgumentTypeError(
                f"{item!r} is not BATCH=TRIALS with TRIALS >= 1 (e.g. 16=5,32=5)"
            )
        out[int(size)] = int(count)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=("grid", "runs", "report"))
    parser.add_argument("--questions", nargs="+", choices=tuple(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument(
        "--first", type=int, default=0, help="runs: start at run K (another process runs the rest)"
    )
    parser.add_argument("--rates", type=int, default=24)
    parser.add_argument("--grid-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--keep-trials",
        type=keep_trials,
        default={},
        metavar="B=N,...",
        help="report: read only each run's first N trials at batch size B (e.g. 16=5,32=5)",
    )
    parser.add_argument(
        "--stop-slower",
        type=float,
        default=None,
        metavar="K",
        help="report: cut each trial where its own curve fell K times behind its batch size's "
        "best so far (e.g. 2)",
    )
    parser.add_argument(
        "--allocation",
        choices=("steps", "even"),
        default="steps",
        help="runs and report: the question file as it is (steps: its budget of training "
        "steps), or with allocation: {mode: even} (8 trials per batch size); each cached apart",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="runs and report: `study run --workers N` (more than one: cached apart, `_w<N>`)",
    )
    args = parser.parse_args()
    if args.stop_slower is not None and not args.stop_slower > 1:
        parser.error(f"--stop-slower must be > 1 (got {args.stop_slower})")
    phases = set(args.only or ("grid", "runs", "report"))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="answer-stability-"))
    GRID_SEEDS_USED[:] = args.grid_seeds
    summary = {}
    for question in args.questions:
        if "grid" in phases:
            run_grid(question, args.rates, args.grid_seeds)
        if "runs" in phases:
            run_studies(question, args.runs, workdir, args.allocation, args.first, args.workers)
        if "report" in phases:
            grid = json.loads(grid_path(question).read_text())
            meta = json.loads(runs_path(question, args.allocation, args.workers).read_text())
            runs = [
                analyse_run(
                    question,
                    int(k),
                    meta[k],
                    args.keep_trials,
                    args.stop_slower,
                    args.allocation,
                    args.workers,
                )
                for k in sorted(meta, key=int)
            ]
            grid = complete(grid)
            GRID_SEEDS_USED[:] = grid["seeds"]
            truth = pooled_truth(grid)
            summary[question] = {
                "truth": truth,
                "runs": runs,
                "checks": report(question, truth, runs),
            }
    if summary and not (
        args.keep_trials or args.stop_slower
    ):  # the cached summary is the runs as they ran
        tag = ("" if args.allocation == "even" else f"_{args.allocation}") + _workers_tag(
            args.workers
        )
        out = RESULTS / f"answer_stability{tag}.json"
        out.write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
