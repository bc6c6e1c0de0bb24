"""What the hold rule of steps to target costs and changes, per study (issue 19, item 1).

Runs ``study run`` on a study file twice, in fresh stores: with ``target_hold: off`` (steps to
target is the first evaluation that met the target, exact steps replaying to it) and with the
default rule (the first step from which the target holds through the next 5% of steps, at
least 5; the cadence tightened to that window). Prints, per batch size, steps to result of
both, and for each study its training steps (the trials' steps plus the chunks trained again
one step at a time), evaluations, and the trials whose crossing fell back before one held.

Step counts do not depend on the machine's load. The two studies' searches can part ways (a
trial's steps are the tuners' feedback), so per-batch-size changes mix the rule with the path.
Usage: python benchmarks/target_hold.py [FILE ...]  (default: the quickstart and
benchmarks/mnist1d_compute.yaml)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from study_bench import DEFAULT_FILES, EVEN, best_steps, finished_trials, run_variant


def summary(workdir: Path, name: str) -> dict:
    """Steps to result per batch size, training steps, evaluations, crossings that fell back."""
    best, steps, evaluations, fell, trials_n = {}, 0, 0, 0, 0
    for batch, trials in finished_trials(workdir, name).items():
        for t in trials:
            steps += t.result.steps_run + int(t.result.environment.get("discarded_steps", 0))
            evaluations += len(t.result.curve)
            fell += bool(t.result.fell_back)
            trials_n += 1
        best[batch] = best_steps(trials)
    return {"best": best, "steps": steps, "evaluations": evaluations, "fell": fell, "n": trials_n}


def compare(file: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="study-hold-") as tmp:
        workdir = Path(tmp)
        first = summary(
            workdir, run_variant(file, workdir, "first", target_hold="off", allocation=EVEN)
        )
        held = summary(workdir, run_variant(file, workdir, "hold", allocation=EVEN))
    print(f"\n{file.name}: steps to result per batch size")
    print(f"{'batch':>6}{'first':>10}{'held':>10}{'change':>9}")
    for batch in sorted(held["best"]):
        a, b = first["best"].get(batch), held["best"][batch]
        change = f"{100 * (b / a - 1):+.1f}%" if a and b else "-"
        print(f"{batch:>6}{a or '-':>10}{b or '-':>10}{change:>9}")
    for label, s in (("first crossing", first), ("hold rule", held)):
        print(
            f"{label}: {s['steps']} training steps, {s['evaluations']} evaluations, "
            f"{s['fell']} of {s['n']} trials with a crossing that fell back"
        )
    print(f"training steps: {100 * (held['steps'] / max(first['steps'], 1) - 1):+.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    for file in parser.parse_args().files:
        compare(file)


if __name__ == "__main__":
    main()
