"""What exact steps to target costs and changes, per study (issue 9).

Runs ``study run`` on a study file twice, in fresh stores: with ``exact_steps: false`` (steps to
target read off the evaluation cadence) and with ``exact_steps: true`` (the default: a trial that
first meets the target at a cadence evaluation replays the steps since the previous one,
evaluating every step). Prints, per batch size, steps to result (the best trial's steps to
target) of both, and for the exact study the training steps of all trials, the replayed steps
and their share ("extra training steps"), and the replay seconds against training seconds.

Step counts do not depend on the machine's load; seconds do.
Usage: python benchmarks/exact_steps.py [FILE ...]  (default: the quickstart and
benchmarks/mnist1d_compute.yaml)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from study_bench import DEFAULT_FILES, EVEN, best_steps, finished_trials, run_variant


def summary(workdir: Path, name: str) -> dict:
    """Steps to result per batch size and the study's training, replay steps and seconds."""
    best, steps, replayed, train_s, replay_s = {}, 0, 0, 0.0, 0.0
    for batch, trials in finished_trials(workdir, name).items():
        for t in trials:
            steps += t.result.steps_run
            replayed += int(t.result.environment.get("replay_steps", 0))
            train_s += t.result.timings.get("train", t.result.train_seconds)
            replay_s += t.result.timings.get("replay", 0.0)
        best[batch] = best_steps(trials)
    return {
        "best": best,
        "steps": steps,
        "replayed": replayed,
        "train_s": train_s,
        "replay_s": replay_s,
    }


def compare(file: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="study-exact-") as tmp:
        workdir = Path(tmp)
        coarse = summary(
            workdir, run_variant(file, workdir, "cadence", exact_steps=False, allocation=EVEN)
        )
        exact = summary(
            workdir, run_variant(file, workdir, "exact", exact_steps=True, allocation=EVEN)
        )
    print(f"\n{file.name}: steps to result per batch size")
    print(f"{'batch':>6}{'cadence':>10}{'exact':>10}{'change':>9}")
    for batch in sorted(exact["best"]):
        a, b = coarse["best"].get(batch), exact["best"][batch]
        change = f"{100 * (b / a - 1):+.1f}%" if a and b else "-"
        print(f"{batch:>6}{a or '-':>10}{b or '-':>10}{change:>9}")
    share = 100 * exact["replayed"] / max(exact["steps"], 1)
    print(
        f"exact study: {exact['steps']} training steps, {exact['replayed']} replayed "
        f"({share:.1f}% extra); replay {exact['replay_s']:.1f} s vs training "
        f"{exact['train_s']:.1f} s; the cadence study trained {coarse['steps']} steps"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    for file in parser.parse_args().files:
        compare(file)


if __name__ == "__main__":
    main()
