"""The answer at a harder target predicted by a cheaper study, checked by the expensive one.

For each question of `answer_stability.py` (``mlp-nesterov``: MNIST-1D MLP to 60%;
``cnn-adam``: MNIST-1D CNN with Adam to 80%) and each run ``k`` (``--runs``): a **cheap study**,
the question file with ``allocation: {mode: even}`` (8 trials per batch size, as the cached
runs), ``seed: k``, ``tuner.seed: k`` and an easier target (``EASIER``: 0.55 and 0.75), run as a
user's ``study run --workers 1``. Its answers are read across targets (`target_scaling`, the
automatic levels up to its target) and predicted at the question's own target, which it never
trained to. The **verifying study** is the cached even-allocation run ``k`` of
`answer_stability.py` (``results/answer_stability/<q>_run<k>.csv.gz``, the same file, seeds and
allocation, trained to the question's target): is its own B_noise, critical batch size (and
batch for 8 accelerators) inside the prediction's 95% interval? And the compute: the cheap
study's training steps (every trial's steps run, pruned ones included) against the verifying
study's (``answer_stability_<q>_runs.json``).

`target_law_real.py` reads the held-out target from the verifying run's own trials; here the
cheap study is a study of its own, with its own pruning at the easier target's pace, so its
steps are what a user would pay.

Each cheap study's measurement table is cached
(``results/answer_stability/<q>_easy<digits>_run<k>.csv.gz``, with its steps in
``results/target_law_cheap.json``), so ``--only report`` reads them again with the analysis of
the day. About 40 s (MLP) and 70 s (CNN) a study on a 2-core machine.

``--easier`` (one threshold per question), ``--trials`` (the cheap study's trials per batch
size) and ``--min-batch`` (its batch sizes from this one up) make other cheap designs, cached
and reported apart (``mlp-nesterov easy055_t6``, ``cnn-adam easy07_b32``). Each run also
records the cheap study's training examples (steps times batch size) over the verifying one's.

Usage: python benchmarks/target_law_cheap.py [--questions mlp-nesterov cnn-adam] [--runs 6]
    [--easier 0.55 0.75] [--trials 8] [--min-batch 0] [--workdir /tmp/target-law-cheap]
    [--only report]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from answer_stability import QUESTIONS, RESULTS, runs_path, save_run, table_path  # noqa: E402
from data_ladder_real import clean  # noqa: E402
from study_bench import EVEN, run_variant  # noqa: E402

from study.analysis.answers import study_answers  # noqa: E402
from study.analysis.target_prediction import target_scaling  # noqa: E402
from study.config.studyfile import load_study_file  # noqa: E402

EASIER = {"mlp-nesterov": 0.55, "cnn-adam": 0.75}
TRIALS = 8
"""The cheap study's trials per batch size by default: the verifying runs' (``--trials``)."""
ACCELERATORS = 8
CHECKED = ("b_noise", "critical_batch", "recommended_batch")
OUT = RESULTS / "target_law_cheap.json"


@dataclasses.dataclass(frozen=True)
class Design:
    """A cheap study: its easier target and trials per batch size."""

    question: str
    easier: float
    trials: int = TRIALS
    min_batch: int = 0
    """The question's batch sizes below it are left out (the dearest in steps)."""

    @property
    def tag(self) -> str:
        """``easy055`` (0.55, 8 trials per batch size), ``easy055_t6`` (6 trials),
        ``easy07_t6_b32`` (batch sizes from 32)."""
        digits = re.sub(r"[^0-9]", "", f"{self.easier:g}")
        trials = "" if self.trials == TRIALS else f"_t{self.trials}"
        return f"easy{digits}{trials}" + (f"_b{self.min_batch}" if self.min_batch else "")

    def key(self, k: int) -> str:
        return f"{self.question}/{k}" + ("" if self.tag == self.default_tag else f"/{self.tag}")

    @property
    def default_tag(self) -> str:
        return Design(self.question, EASIER[self.question]).tag

    def path(self, k: int) -> Path:
        return RESULTS / "answer_stability" / f"{self.question}_{self.tag}_run{k}.csv.gz"


def run_cheap(design: Design, k: int, workdir: Path, done: dict[str, Any]) -> None:
    """Run k's cheap study unless its table is cached; record its training steps."""
    question, key = design.question, design.key(k)
    if key in done and design.path(k).exists():
        return
    file = QUESTIONS[question]
    base = yaml.safe_load(file.read_text())
    metric, _, _ = base["target"].partition(">=")
    name = run_variant(
        file,
        workdir,
        f"{design.tag}-run{k}",
        target=f"{metric}>={design.easier:g}",
        seed=k,
        tuner={**base["tuner"], "seed": k},
        allocation=EVEN,
        trials_per_stratum=design.trials,
        search_space={
            **base["search_space"],
            "batch_size": [b for b in base["search_space"]["batch_size"] if b >= design.min_batch],
        },
    )
    done[key] = {"training_steps": save_run(workdir, name, design.path(k))}
    print(f"  {key} cheap run: {done[key]['training_steps']} steps", flush=True)


def read_run(design: Design, k: int, done: dict[str, Any]) -> dict[str, Any]:
    """Run k's prediction from its cheap study against the verifying run's own answers."""
    question = design.question
    config = load_study_file(QUESTIONS[question])
    target = config.target
    easier = dataclasses.replace(target, threshold=design.easier)
    cheap = pd.read_csv(design.path(k))
    reading = target_scaling(
        cheap, easier, predict=target.threshold, accelerators=ACCELERATORS,
        overhead=config.overhead,
    )  # fmt: skip
    verifying = pd.read_csv(table_path(question, k, "even"))
    measured = study_answers(verifying, target, accelerators=ACCELERATORS, overhead=config.overhead)
    full_steps = json.loads(runs_path(question, "even").read_text())[str(k)]["training_steps"]
    cheap_steps = done[design.key(k)]["training_steps"]
    prediction = reading.prediction
    out: dict[str, Any] = {
        "run": k,
        "levels": [lv.threshold for lv in reading.sweep.levels],
        "law": reading.laws["b_noise"].kind if reading.laws["b_noise"].ok else None,
        "prediction": prediction.to_dict() if prediction else None,
        "measured": {
            name: getattr(measured, name).to_dict()
            for name in CHECKED
            if getattr(measured, name) is not None
        },
        "steps": {"cheap": cheap_steps, "verifying": full_steps, "ratio": cheap_steps / full_steps},
        "examples_ratio": _examples(cheap) / _examples(verifying),
    }
    if prediction is not None and prediction.ok and measured.ok:
        for name in CHECKED:
            guess, actual = getattr(prediction, name), getattr(measured, name)
            if guess is not None and actual is not None:
                out[f"{name}_covered"] = guess.covers(actual.estimate)
                out[f"{name}_equal"] = guess.estimate == actual.estimate
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", nargs="+", default=list(QUESTIONS), choices=QUESTIONS)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument(
        "--easier", type=float, nargs="+", default=None, help="per question, in order"
    )
    parser.add_argument("--trials", type=int, default=TRIALS, help="the cheap study's, per batch")
    parser.add_argument(
        "--min-batch", type=int, default=0, help="leave the cheap study's batch sizes below it out"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/target-law-cheap"))
    parser.add_argument("--only", choices=("report",), help="read the cached studies only")
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    done = results.setdefault("studies", {})
    easier = args.easier or [EASIER[q] for q in args.questions]
    for question, threshold in zip(args.questions, easier, strict=True):
        design = Design(question, threshold, args.trials, args.min_batch)
        if args.only != "report":
            args.workdir.mkdir(parents=True, exist_ok=True)
            for k in range(args.runs):
                run_cheap(design, k, args.workdir, done)
                OUT.write_text(json.dumps(results, indent=1) + "\n")
        rows = [read_run(design, k, done) for k in range(args.runs)]
        for row in rows:
            print(f"{question} run {row['run']}: {_line(row)}", flush=True)
        counts = {
            f"{name}_covered": sum(bool(r.get(f"{name}_covered")) for r in rows) for name in CHECKED
        }
        counts["recommended_batch_equal"] = sum(
            bool(r.get("recommended_batch_equal")) for r in rows
        )
        ratios = [round(r["steps"]["ratio"], 3) for r in rows]
        examples = [round(r["examples_ratio"], 3) for r in rows]
        name = question if design.tag == design.default_tag else f"{question} {design.tag}"
        results[name] = {
            "easier": threshold, "trials_per_stratum": design.trials, "runs": rows,
            "min_batch": design.min_batch, "of": len(rows), **counts, "steps_ratio": ratios,
            "examples_ratio": examples,
        }  # fmt: skip
        print(f"{name}: {json.dumps(counts)}; cheap / verifying steps {ratios}", flush=True)
    OUT.write_text(json.dumps(clean(results), indent=1, allow_nan=False) + "\n")


def _examples(table: pd.DataFrame) -> float:
    """Training examples of a measurement table: each trial's last step times its batch size."""
    last = table.groupby("trial").agg(batch=("batch_size", "first"), steps=("step", "max"))
    return float((last["batch"] * last["steps"]).sum())


def _line(row: dict[str, Any]) -> str:
    p = row["prediction"]
    if p is None or not p["ok"]:
        return f"no prediction ({p and p['reason']})"
    shown = []
    for name in CHECKED:
        guess, actual = p.get(name), row["measured"].get(name)
        if guess and actual:
            shown.append(
                f"{name} {_num(guess)} vs {actual['estimate']:.3g} "
                f"{'in' if row.get(name + '_covered') else 'OUT'}"
            )
    return "; ".join(shown) + f"; steps x{row['steps']['ratio']:.2f}"


def _num(answer: dict[str, Any]) -> str:
    low, high = (math.inf if answer[k] is None else answer[k] for k in ("low", "high"))
    return f"{answer['estimate']:.3g} ({low:.3g}-{high:.3g})"


if __name__ == "__main__":
    main()
