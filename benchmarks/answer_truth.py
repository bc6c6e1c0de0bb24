"""Answer truth: every derived answer of six study runs against the dense grids, model-free.

For both questions of `benchmarks/answer_stability.py` this reads the cached dense grid
(``results/answer_stability_<question>_grid.json``, the seeds that ran every point) without a
model (`study.analysis.model_free`): the steps per batch size pooled over seeds 0-2 (per point
the median over seeds, a seed that never reached counting as infinite; per batch size the
fewest medians), and each seed's own reading (its best trial per batch size), whose range is
the seed spread. Each reading gives the 20%-overhead point (``E(B) / E(16)`` first above 1.2,
interpolated in log-log, with its bracket of two measured sizes), the end of perfect scaling
and the start of maximal data parallelism (the rules of `study.analysis.regimes`).

The grid's model-free **batch for 8 accelerators** is the rule of `study.analysis.answers`
(`_choose`: the largest measured size divisible by 8 up to a limit) with the limit
``max(perfect_end, 20%-overhead point)`` of the pooled reading: the model's limit is
``max(perfect_end, B_noise)``, and B_noise has no model-free reading; the 20% point stands in
for it (under the knee curve it is ``B_noise ((1.2)^q - 1)^(1/q)``: B_noise itself near q = 4,
a fifth of it at q = 1, where this choice is the more cautious).

Then each of the six even-allocation runs (``results/answer_stability/<question>_run<k>.csv.gz``,
the question file with ``allocation: {mode: even}``) is read with `study_answers` (8
accelerators, the question's target) and model-free (best trial per batch size at the midpoint
of its crossing bracket, `crossing_estimate`), and each answer is compared with the pooled
grid reading. **Meets** means:

- critical batch size: the run's estimate lies in the pooled bracket ``[low, high]`` (closed;
  for a reading beyond the largest size, ``[largest, inf)``); also shown, whether its interval
  overlaps the bracket (``~``) and whether the estimate lies within the seeds' brackets' span;
- end of perfect scaling, start of maximal data parallelism, batch for 8: the run's interval
  covers the grid's model-free value (`Answer.covers`, ``inf`` for "beyond the measured
  sizes", the rule `answer_stability.py` applies to its truth); also shown, whether the
  estimate equals it (``=``);
- B_noise: no model-free reading; the runs' max/min of the estimates.

Acceptance: B_noise max/min <= 1.4; the critical batch size meets in at least 5 of 6 runs, the
end of perfect scaling in at least 5 of 6, the batch for 8 in 6 of 6 (maximal data parallelism
is reported, not judged). With ``--runs 12`` each six (runs 0-5, 6-11) is judged on its own:
one block of six is one draw of the acceptance, and the tuner seeds are not named by it. Writes ``results/answer_truth.json`` (``null`` for infinite or
missing values) and prints a table per question.

Usage: python benchmarks/answer_truth.py [--questions mlp-nesterov cnn-adam] [--runs N]
(default: every run cached, ``--runs 12`` in ``answer_stability.py`` makes twelve)
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np
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

from study.analysis.answers import Answer, _choose, study_answers
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
    """The grid's pooled and per-seed model-free readings and its batch for `ACCELERATORS`."""
    grid = complete(json.loads(grid_path(question).read_text()))
    trials = grid_trials(grid)
    pooled = model_free_readings(pooled_steps(trials))
    seeds = {
        int(s): model_free_readings(pooled_steps(trials[trials["seed"] == s]))
        for s in grid["seeds"]
    }
    return {"pooled": pooled, "seeds": seeds, "batch_for_8": batch_for(pooled)}


def batch_for(readings: ModelFree, accelerators: int = ACCELERATORS) -> float:
    """The model-free batch size for ``accelerators`` (see the module; NaN without readings)."""
    if not readings.ok:
        return math.nan
    limit = max(readings.perfect_end, readings.critical)
    sizes = np.asarray(readings.batch_sizes, dtype=float)
    return float(_choose(sizes, accelerators, np.array([limit]))[0])


def run_readings(question: str, k: int) -> tuple[dict[str, Answer], ModelFree]:
    """Run k's model answers and its own model-free reading."""
    target = load_study_file(QUESTIONS[question]).target
    table = pd.read_csv(table_path(question, k, "even"))
    answers = study_answers(table, target, accelerators=ACCELERATORS)
    if not answers.ok:
        raise SystemExit(f"{question} run {k}: no answers ({answers.reason})")
    crossings = trial_crossings(table, target)
    crossings["crossing"] = crossing_estimate(
        crossings["steps_to_target"].to_numpy(float), crossings[PREVIOUS_STEP].to_numpy(float)
    )
    model = {name: getattr(answers, name) for name in ANSWERS if getattr(answers, name)}
    return model, model_free_readings(pooled_steps(crossings, column="crossing"))


def judge(model: dict[str, Answer], grid: dict[str, Any]) -> dict[str, bool]:
    """Whether each of a run's answers meets the grid's pooled reading (see the module)."""
    pooled: ModelFree = grid["pooled"]
    low, high = pooled.bracket or (math.nan, math.nan)
    spans = [s.bracket for s in grid["seeds"].values() if s.bracket]
    crit = model["critical_batch"]
    out = {
        "critical_batch": low <= crit.estimate <= high,
        "critical_batch_overlaps": crit.low <= high and crit.high >= low,
        "critical_batch_in_seed_span": bool(spans)
        and min(s[0] for s in spans) <= crit.estimate <= max(s[1] for s in spans),
    }
    truths = {
        "perfect_end": pooled.perfect_end,
        "max_parallel_start": pooled.max_parallel_start,
        "recommended_batch": grid["batch_for_8"],
    }
    for name, value in truths.items():
        answer = model.get(name)
        out[name] = answer is not None and answer.covers(value)
        out[f"{name}_equal"] = answer is not None and answer.estimate == value
    return out


def compare(question: str, runs: int) -> dict[str, Any]:
    """The grid's readings, each run's answers and readings, and the acceptance counts."""
    grid = grid_readings(question)
    rows = []
    for k in range(runs):
        model, own = run_readings(question, k)
        rows.append(
            {
                "run": k,
                "model": model,
                "model_free": own,
                "meets": judge(model, grid),
                "grid_overhead_at_batch_for_8": measured_overhead(grid["pooled"], model),
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


def measured_overhead(pooled: ModelFree, model: dict[str, Answer]) -> float | None:
    """The grid's pooled ``E(B) / E(16) - 1`` at the run's batch for 8 (None if unmeasured)."""
    answer = model.get("recommended_batch")
    ratios = dict(zip(pooled.batch_sizes, pooled.ratios, strict=True))
    return None if answer is None or answer.estimate not in ratios else ratios[answer.estimate] - 1


def show(question: str, result: dict[str, Any]) -> None:
    """Print the grid's readings and a row per run."""
    grid = result["grid"]
    print(f"\n## {question}")
    print(f"grid, pooled over seeds: {grid['pooled'].text()}; batch for 8: {grid['batch_for_8']:g}")
    for seed, readings in grid["seeds"].items():
        print(f"grid, seed {seed}: {readings.text()}")
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
        over = "~" if meets["critical_batch_overlaps"] else ""
        own_text = f"{own.critical:.0f}" if own.ok and not own.beyond else "beyond"
        own_text += f", perfect {own.perfect_end:g}" if own.ok else ""
        cells = [
            f"{m['b_noise'].text()}",
            _cell(m.get("critical_batch"), meets["critical_batch"], over),
            own_text,
            *(
                _cell(m.get(n), meets[n], "=" if meets[f"{n}_equal"] else "")
                for n in ("perfect_end", "max_parallel_start", "recommended_batch")
            ),
        ]
        cells[-1] += overhead
        print(f"| {row['run']} | " + " | ".join(cells) + " |")
    counts = result["counts"]
    runs = len(result["runs"])
    print(
        f"\nB_noise max/min {result['b_noise_ratio']:.3f} (<= {B_NOISE_RATIO}; critical batch "
        f"{result['critical_batch_ratio']:.2f}); meets: "
        + ", ".join(f"{n} {counts[n]}/{runs}" for n in (*NEEDED, "max_parallel_start"))
        + f"; critical overlaps {counts['critical_batch_overlaps']}/{runs}"
    )
    for block in result["blocks"]:
        first, last = block["judged"][0], block["judged"][-1]
        print(
            f"runs {first}-{last}: B_noise max/min {block['b_noise_ratio']:.2f}; "
            + ", ".join(f"{n} {block['counts'][n]}/{len(block['judged'])}" for n in NEEDED)
            + "; accepted: "
            + ("yes" if block["accepted"] else "no")
        )


def as_json(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as plain JSON values."""
    grid = result["grid"]
    return {
        "grid": {
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


def _cell(answer: Answer | None, ok: bool, mark: str) -> str:
    """``"256 (128-512) ok="``: the answer, whether it meets, and ``mark``."""
    text = "-" if answer is None else answer.text().replace("beyond the measured sizes", "beyond")
    return f"{text} {'ok' if ok else 'NO'}{mark}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", nargs="+", choices=tuple(QUESTIONS), default=list(QUESTIONS))
    parser.add_argument("--runs", type=int, default=None, help="default: every cached run")
    args = parser.parse_args()
    summary = {}
    for question in args.questions:
        cached = json.loads(runs_path(question, "even").read_text())
        result = compare(question, args.runs or len(cached))
        show(question, result)
        summary[question] = as_json(result)
    OUT.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"\nwrote {OUT.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
