"""Adaptive vs even allocation of a study's trials at the same total budget (issue 9).

Runs ``study run`` on one study file twice, in fresh stores: with even allocation (every batch
size of the grid gets ``trials_per_stratum`` trials) and with ``allocation: {mode: adaptive}``
(a pilot's B_simple chooses the grid among the file's batch sizes; half the trials first, the
rest in rounds to the strata where the fit is least certain). Both have the same total trial
budget (``trials_per_stratum`` x the file's batch sizes). Prints, for each, the batch sizes run
and their trials, the fitted B_noise of ``S(B) = S_min (1 + B_noise / B)`` on the best steps per
batch size with its 95% profile interval and the interval's width (high / low), where each
batch size's best learning rate lies among the rates its trials ran (``inside``, at the ``top``
or ``bottom`` edge, or a ``single`` trial: `study.tuners.history.best_rate`), and the pilot's
B_simple with its interval. Over the seeds it summarises in how many adaptive's interval is
narrower, and the median width each way. Writes the numbers to
``benchmarks/results/adaptive_allocation.json`` (``seeds``: per seed, both studies; ``summary``).

Usage: python benchmarks/adaptive_allocation.py [FILE] [--trials-per-stratum N] [--seeds S ...]
[--jobs J] (default: benchmarks/mnist1d_compute.yaml with its grid widened to 8 ... 2048, 4
trials per batch size, seeds 0 to 5, one study at a time). Each seed is one pair of studies
(the seed trains and tunes); every seed asked for is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from study_bench import run_study

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "benchmarks" / "mnist1d_compute.yaml"
DEFAULT_GRID = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
OUT = ROOT / "benchmarks" / "results" / "adaptive_allocation.json"
DEFAULT_SEEDS = [0, 1, 2, 3, 4, 5]
MODES = ("even", "adaptive")


def run(config: dict, mode: str, workdir: Path) -> tuple[str, float]:
    """Run the study with ``allocation.mode`` set, in ``workdir``; its name and wall seconds."""
    config = dict(config, name=f"{config['name']}-{mode}", allocation={"mode": mode})
    copy = workdir / f"{config['name']}.yaml"
    copy.write_text(yaml.safe_dump(config, sort_keys=False))
    done, seconds = run_study(copy, workdir, "--tuner", "optuna")
    lines = [line for line in done.stdout.splitlines() if line.startswith(("allocation", "pilot"))]
    print(f"seed {config['seed']} {mode}:", *lines, sep="\n  ", flush=True)
    return config["name"], seconds


def summary(workdir: Path, name: str) -> dict:
    """Trials per batch size, best steps, the fit of B_noise with its interval, the pilot."""
    from study.analysis.noise_scale import fit_noise_scale
    from study.ledger import Ledger
    from study.tuners.history import best_rate

    ledger = Ledger.open(str(workdir / "mlruns" / "optuna.journal"), name, create=False)
    trials, best, best_lr, edge = {}, {}, {}, {}
    for stratum in ledger.strata():
        trials[stratum.batch_size] = len(ledger.counted(stratum))
        top = ledger.best(stratum)
        best[stratum.batch_size] = (
            float(top.steps_to_target) if top and top.steps_to_target else float("inf")
        )
        best_lr[stratum.batch_size] = top.learning_rate if top else None
        rate = best_rate(ledger.trials(stratum))
        edge[stratum.batch_size] = (
            None
            if rate is None
            else "single"
            if not rate.informative
            else "top"
            if rate.open_high
            else "bottom"
            if rate.open_low
            else "inside"
        )
    sizes = sorted(best)
    fit = fit_noise_scale(sizes, [best[b] for b in sizes])
    low, high = fit.b_noise_ci if fit.ok and fit.b_noise_ci else (None, None)
    pilot = ledger.notes.pilot()
    state = ledger.notes.allocation()
    return {
        "trials": trials,
        "total_trials": sum(trials.values()),
        "best_steps": best,
        "best_lr": best_lr,
        "best_lr_edge": edge,
        "b_noise": fit.b_noise if fit.ok else None,
        "b_noise_ci": [low, high],
        "ci_width": high / low if low and high else None,
        "pilot": None
        if pilot is None
        else {
            k: pilot.to_stored()[k]
            for k in ("batch_size", "b_simple", "b_simple_low", "b_simple_high")
        },
        "decisions": None if state is None else state.to_stored()["decisions"],
    }


def report(results: dict) -> None:
    for mode, r in results.items():
        low, high = r["b_noise_ci"]
        print(
            f"{mode:>8}: {r['total_trials']} trials over batch sizes {sorted(r['trials'])}; "
            f"B_noise {r['b_noise']:.4g} (95% {low:.4g} to {high:.4g}, width x{r['ci_width']:.3g})"
            if r["b_noise"] and low
            else f"{mode:>8}: {r['total_trials']} trials; no B_noise interval"
        )
        edges = [e for e in r["best_lr_edge"].values() if e is not None]
        print(
            f"{'':>8}  best rate: "
            + ", ".join(
                f"{n} {kind}"
                for kind in ("inside", "top", "bottom", "single")
                if (n := edges.count(kind))
            )
        )
    pilot = results["adaptive"]["pilot"]
    if pilot:
        print(
            f"pilot at batch {pilot['batch_size']}: B_simple {pilot['b_simple']:.4g} "
            f"(95% {pilot['b_simple_low']:.4g} to {pilot['b_simple_high']:.4g})"
        )


def summarise(by_seed: dict) -> dict:
    """Per seed the two widths (high / low of B_noise's interval; None without one), in how
    many seeds adaptive's is narrower, and the median width each way."""
    widths = {seed: {m: r[m]["ci_width"] for m in MODES} for seed, r in by_seed.items()}
    inf = float("inf")
    narrower = [s for s, w in widths.items() if (w["adaptive"] or inf) < (w["even"] or inf)]
    return {
        "widths": widths,
        "adaptive_narrower": len(narrower),
        "seeds": len(widths),
        "narrower_seeds": narrower,
        "median_width": {
            m: statistics.median(w[m] if w[m] is not None else inf for w in widths.values())
            for m in MODES
        },
    }


def pair(config: dict, seed: int) -> dict:
    """The even and the adaptive study of one seed, in a fresh store."""
    config = dict(config, seed=seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="adaptive-") as tmp:
        for mode in MODES:
            name, seconds = run(config, mode, Path(tmp))
            results[mode] = {**summary(Path(tmp), name), "wall_seconds": round(seconds, 1)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE)
    parser.add_argument("--trials-per-stratum", type=int, default=4)
    parser.add_argument(
        "--seeds", "--seed", type=int, nargs="+", default=DEFAULT_SEEDS, help="seeds (0 to 5)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once (default 1)")
    args = parser.parse_args()
    config = yaml.safe_load(args.file.read_text())
    if args.file == DEFAULT_FILE:
        config["search_space"]["batch_size"] = DEFAULT_GRID
    config["trials_per_stratum"] = args.trials_per_stratum
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(lambda seed: pair(config, seed), args.seeds))
    by_seed = dict(zip(args.seeds, done, strict=True))
    for seed, results in by_seed.items():
        print(f"seed {seed}:")
        report(results)
    overall = summarise(by_seed)
    print(
        f"adaptive narrower in {overall['adaptive_narrower']} of {overall['seeds']} seeds; "
        f"median width even x{overall['median_width']['even']:.3g}, "
        f"adaptive x{overall['median_width']['adaptive']:.3g}"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    out = {
        "config": {
            "trials_per_stratum": args.trials_per_stratum,
            "batch_sizes": config["search_space"]["batch_size"],
        },
        "summary": overall,
        "seeds": by_seed,
    }
    OUT.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
