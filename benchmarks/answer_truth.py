"""Answer truth: every derived answer of the study runs against the dense grids, model-free.

For both questions of `benchmarks/answer_stability.py` this reads the cached dense grid
(``results/answer_stability_<question>_grid.json``: 24 learning rates at every batch size,
training seeds 0-2) without a model of S(B), two ways:

- **smoothed, with the grid's own intervals** (`grid_truth`): per batch size a quadratic in log
  rate through every seed's trials around the best point, its minimum the batch size's steps;
  draws of the quadratics give each reading a 95% interval. This is the truth the runs are
  judged against: at one seed, steps to target is a jagged function of the rate, and the fewest
  steps of 24 rates is the luckiest draw, not what the batch size needs (see `grid_truth`).
- **raw**: per point the median steps over seeds (a seed that never reached counting as
  infinite), per batch size the fewest medians (`study.analysis.model_free.pooled_steps`), and
  each seed's own reading; shown beside, with the runs' counts against it.

Each reading gives the 20%-overhead point (``E(B) / E(16)`` first above 1.2, interpolated in
log-log, with its bracket of two measured sizes), the end of perfect scaling and the start of
maximal data parallelism (the rules of `study.analysis.regimes`), and the batch for 8
accelerators (`grid_truth.batch_for`: the rule of `study.analysis.answers` up to
``max(perfect_end, 20% point)``; the model's limit is ``max(perfect_end, critical batch
size)``).

Then each even-allocation run (``results/answer_stability/<question>_run<k>.csv.gz``, the
question file with ``allocation: {mode: even}``, run k at ``seed: k`` and ``tuner.seed: k``) is
read with `study_answers` (8 accelerators, the question's target) and model-free (best trial per
batch size at the midpoint of its crossing bracket, `crossing_estimate`), and each answer is
compared with the grid. **Meets** means the run's estimate lies inside the smoothed grid's 95%
interval, for the critical batch size, the end of perfect scaling, the start of maximal data
parallelism and the batch for 8 alike. Also counted: the run's interval holds the smoothed
grid's central reading (``holds``); against the raw reading, the critical batch size's estimate
in the raw bracket and the batch answers' intervals holding the raw value (``raw``).

Acceptance: B_noise max/min <= 1.4; the critical batch size meets in at least 5 of 6 runs, the
end of perfect scaling in at least 5 of 6, the batch for 8 in 6 of 6 (maximal data parallelism
is reported, not judged). With ``--runs 12`` each six (runs 0-5, 6-11) is judged on its own:
one block of six is one draw of the acceptance, and the tuner seeds are not named by it. Writes
``results/answer_truth.json`` (``null`` for infinite or missing values) and prints a table per
question.

``--allocation steps`` reads the runs of the question files as they are (allocation by training
steps, ``answer_stability.py --allocation steps``) instead, into ``results/answer_truth_steps.json``.

Usage: python benchmarks/answer_truth.py [--questions mlp-nesterov cnn-adam] [--runs N]
[--allocation even|steps] (default: every run cached, ``--runs 12`` in ``answer_stability.py``
makes twelve)
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import pandas as pd
from answer_stability import (
    ACCELERATORS,
    QUESTIONS,
    RESULTS,
    complete,
    grid_path,
    grid_trials,
    runs_path,
    table_path,
)
from grid_truth import Smoothed, batch_for, smoothed_grid, truth_readings

from study.analysis.answers import Answer, study_answers
from study.analysis.crossings import PREVIOUS_STEP, crossing_estimate, trial_crossings
from study.analysis.model_free import ModelFree, model_free_readings, pooled_steps
from study.config.studyfile import load_study_file

OUT = RESULTS / "answer_truth.json"
ANSWERS = ("b_noise", "critical_batch", "perfect_end", "max_parallel_start", "recommended_batch")
NEEDED = {"critical_batch": 5, "perfect_end": 5, "recommended_batch": 6}
B_NOISE_RATIO = 1.4
BLOCK = 6
"""The acceptance reads six runs; more (``--runs 12``) are judged six at a time (runs 0-5,
6-11), each block on its own, and over all of them."""


def grid_readings(question: str) -> dict[str, Any]:
    """The grid's smoothed truth (`grid_truth`), its raw pooled and per-seed model-free
    readings, and the raw batch for `ACCELERATORS`."""
    grid = complete(json.loads(grid_path(question).read_text()))
    trials = grid_trials(grid)
    pooled = model_free_readings(pooled_steps(trials))
    seeds = {
        int(s): model_free_readings(pooled_steps(trials[trials["seed"] == s]))
        for s in grid["seeds"]
    }
    smoothed = smoothed_grid(trials)
    return {
        "pooled": pooled,
        "seeds": seeds,
        "batch_for_8": batch_for(pooled, ACCELERATORS),
        "smoothed": smoothed,
        "truth": truth_readings(smoothed),
    }


def run_readings(
    question: str, k: int, allocation: str = "even"
) -> tuple[dict[str, Answer], ModelFree]:
    """Run k's model answers and its own model-free reading."""
    target = load_study_file(QUESTIONS[question]).target
    table = pd.read_csv(table_path(question, k, allocation))
    answers = study_answers(table, target, accelerators=ACCELERATORS)
    if not answers.ok:
        raise SystemExit(f"{question} run {k}: no answers ({answers.reason})")
    crossings = trial_crossings(table, target)
    crossings["crossing"] = crossing_estimate(
        crossings["steps_to_target"].to_numpy(float), crossings[PREVIOUS_STEP].to_numpy(float)
    )
    model = {name: getattr(answers, name) for name in ANSWERS if getattr(answers, name)}
    return model, model_free_readings(pooled_steps(crossings, column="crossing"))


JUDGED = ("critical_batch", "perfect_end", "max_parallel_start", "recommended_batch")


def judge(model: dict[str, Answer], grid: dict[str, Any]) -> dict[str, bool]:
    """Whether each of a run's answers meets the grid (see the module): ``<name>`` against the
    smoothed truth's interval, ``<name>_holds`` the run's interval holding its central reading,
    ``<name>_raw`` against the raw pooled reading, ``<name>_equal`` the estimate equal to the
    truth's."""
    truth: dict[str, Answer] = grid["truth"]
    pooled: ModelFree = grid["pooled"]
    low, high = pooled.bracket or (math.nan, math.nan)
    raw = {  # the critical batch size is judged against the raw bracket instead
        "perfect_end": pooled.perfect_end,
        "max_parallel_start": pooled.max_parallel_start,
        "recommended_batch": grid["batch_for_8"],
    }
    out: dict[str, bool] = {}
    for name in JUDGED:
        answer, true = model.get(name), truth[name]
        out[name] = answer is not None and true.covers(answer.estimate)
        out[f"{name}_holds"] = answer is not None and answer.covers(true.estimate)
        out[f"{name}_equal"] = answer is not None and answer.estimate == true.estimate
        if name == "critical_batch":
            out[f"{name}_raw"] = answer is not None and low <= answer.estimate <= high
        else:
            out[f"{name}_raw"] = answer is not None and answer.covers(raw[name])
    return out


def compare(question: str, runs: int, allocation: str = "even") -> dict[str, Any]:
    """The grid's readings, each run's answers and readings, and the acceptance counts."""
    grid = grid_readings(question)
    rows = []
    for k in range(runs):
        model, own = run_readings(question, k, allocation)
        rows.append(
            {
                "run": k,
                "model": model,
                "model_free": own,
                "meets": judge(model, grid),
                "grid_overhead_at_batch_for_8": measured_overhead(grid["smoothed"], model),
            }
        )
    blocks = [judge_block(rows[k : k + BLOCK]) for k in range(0, len(rows) - BLOCK + 1, BLOCK)]
    every = judge_block(rows)
    return {
        "grid": grid,
        "runs": rows,
        "b_noise_ratio": every["b_noise_ratio"],
        "counts": every["counts"],
        "critical_batch_ratio": spread([r["model"]["critical_batch"].estimate for r in rows]),
        "accepted": bool(blocks) and all(b["accepted"] for b in blocks),
        "blocks": blocks,
    }


def judge_block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The acceptance over ``rows`` (six runs: `BLOCK`): B_noise's max/min, the meets counted
    and whether both pass (`NEEDED` scaled to the rows)."""
    counts = {n: sum(r["meets"][n] for r in rows) for n in rows[0]["meets"]}
    ratio = spread([r["model"]["b_noise"].estimate for r in rows])
    needed = {n: m * len(rows) / BLOCK for n, m in NEEDED.items()}
    return {
        "judged": [r["run"] for r in rows],
        "b_noise_ratio": ratio,
        "counts": counts,
        "accepted": ratio <= B_NOISE_RATIO and all(counts[n] >= m for n, m in needed.items()),
    }


def spread(values: list[float]) -> float:
    """Max over min."""
    return max(values) / min(values)


def measured_overhead(smoothed: Smoothed, model: dict[str, Answer]) -> float | None:
    """The smoothed grid's ``E(B) / E(16) - 1`` at the run's batch for 8 (None if unmeasured)."""
    answer = model.get("recommended_batch")
    examples = smoothed.batch_sizes * smoothed.steps
    ratios = dict(zip(smoothed.batch_sizes, examples / examples[0], strict=True))
    if answer is None or answer.estimate not in ratios:
        return None
    return float(ratios[answer.estimate] - 1)


def show(question: str, result: dict[str, Any]) -> None:
    """Print the grid's readings and a row per run."""
    grid = result["grid"]
    truth: dict[str, Answer] = grid["truth"]
    print(f"\n## {question}")
    steps = ", ".join(f"{b:g}: {s:.0f}" for b, s in zip(*_smoothed_steps(grid), strict=True))
    print(f"grid, smoothed steps: {steps}")
    print(
        "grid, smoothed (95% over its draws): "
        + "; ".join(f"{TITLES[n]} {truth[n].text()}" for n in JUDGED)
    )
    print(f"grid, raw pooled: {grid['pooled'].text()}; batch for 8: {grid['batch_for_8']:g}")
    for seed, readings in grid["seeds"].items():
        print(f"grid, raw seed {seed}: {readings.text()}")
    print(
        "\n| run | B_noise | critical: model | run model-free | perfect end | maximal from "
        "| batch for 8 |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in result["runs"]:
        m, meets = row["model"], row["meets"]
        extra = row["grid_overhead_at_batch_for_8"]
        overhead = "" if extra is None else f" (grid {extra:+.0%})"
        own: ModelFree = row["model_free"]
        own_text = f"{own.critical:.0f}" if own.ok and not own.beyond else "beyond"
        own_text += f", perfect {own.perfect_end:g}" if own.ok else ""
        cells = [f"{m['b_noise'].text()}"]
        for name in JUDGED:
            cells.append(_cell(m.get(name), meets, name))
        cells.insert(2, own_text)
        cells[-1] += overhead
        print(f"| {row['run']} | " + " | ".join(cells) + " |")
    counts = result["counts"]
    runs = len(result["runs"])
    print(
        f"\nB_noise max/min {result['b_noise_ratio']:.3f} (<= {B_NOISE_RATIO}; critical batch "
        f"{result['critical_batch_ratio']:.2f}); meets (holds, raw): "
        + ", ".join(
            f"{n} {counts[n]} ({counts[n + '_holds']}, {counts[n + '_raw']})/{runs}" for n in JUDGED
        )
    )
    for block in result["blocks"]:
        first, last = block["judged"][0], block["judged"][-1]
        print(
            f"runs {first}-{last}: B_noise max/min {block['b_noise_ratio']:.2f}; "
            + ", ".join(f"{n} {block['counts'][n]}/{len(block['judged'])}" for n in NEEDED)
            + "; accepted: "
            + ("yes" if block["accepted"] else "no")
        )


TITLES = {
    "critical_batch": "20% point",
    "perfect_end": "perfect to",
    "max_parallel_start": "maximal from",
    "recommended_batch": "batch for 8",
}


def _smoothed_steps(grid: dict[str, Any]) -> tuple[list[float], list[float]]:
    smoothed: Smoothed = grid["smoothed"]
    return [float(b) for b in smoothed.batch_sizes], [float(s) for s in smoothed.steps]


def as_json(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as plain JSON values."""
    grid = result["grid"]
    sizes, steps = _smoothed_steps(grid)
    smoothed: Smoothed = grid["smoothed"]
    return {
        "grid": {
            "smoothed": {
                "batch_sizes": sizes,
                "steps": steps,
                "trials_read": [int(p) for p in smoothed.points],
                "truth": {n: a.to_dict() for n, a in grid["truth"].items()},
            },
            "pooled": grid["pooled"].to_dict(),
            "seeds": {str(s): r.to_dict() for s, r in grid["seeds"].items()},
            "batch_for_8": grid["batch_for_8"],
        },
        "runs": [
            {
                "run": r["run"],
                "model": {n: a.to_dict() for n, a in r["model"].items()},
                "model_free": r["model_free"].to_dict(),
                "meets": r["meets"],
                "grid_overhead_at_batch_for_8": r["grid_overhead_at_batch_for_8"],
            }
            for r in result["runs"]
        ],
        **{
            k: result[k]
            for k in ("b_noise_ratio", "critical_batch_ratio", "counts", "accepted", "blocks")
        },
    }


def _cell(answer: Answer | None, meets: dict[str, bool], name: str) -> str:
    """``"256 (128-512) ok h= r"``: the answer, whether it meets, holds the truth (``h``),
    equals it (``=``), meets the raw reading (``r``)."""
    text = "-" if answer is None else answer.text().replace("beyond the measured sizes", "beyond")
    marks = "".join(
        mark for key, mark in (("_holds", "h"), ("_equal", "="), ("_raw", "r")) if meets[name + key]
    )
    return f"{text} {'ok' if meets[name] else 'NO'} {marks}".rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", nargs="+", choices=tuple(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--runs", type=int, default=None, help="default: every cached run")
    parser.add_argument(
        "--allocation",
        choices=("even", "steps"),
        default="even",
        help="the runs read: the question file with allocation: {mode: even} (the acceptance's "
        "default), or as it is (its budget of training steps); steps writes "
        "results/answer_truth_steps.json",
    )
    args = parser.parse_args()
    summary = {}
    for question in args.questions:
        cached = json.loads(runs_path(question, args.allocation).read_text())
        result = compare(question, args.runs or len(cached), args.allocation)
        show(question, result)
        summary[question] = as_json(result)
    out = (
        OUT if args.allocation == "even" else OUT.with_name(f"answer_truth_{args.allocation}.json")
    )
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nwrote {out.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
