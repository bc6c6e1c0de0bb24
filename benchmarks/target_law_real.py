"""The answer across targets on real studies: the cached runs of `answer_stability.py`.

For each question (``mlp-nesterov``: MNIST-1D MLP to 60%; ``cnn-adam``: MNIST-1D CNN to 80%)
and each of its six cached even-allocation runs (``results/answer_stability/<q>_run<k>.csv.gz``,
the study file's target and hold rule), two readings:

- **the law**: `target_scaling` at the automatic levels up to the study's target, with the
  prediction at a harder level (``HARDER``: 0.65 and 0.85) the runs never reached (they stopped
  at the target), whose truth is unknown here;
- **a held-out check**: the same reading as if the study's target had been an easier one
  (``HELD_OUT``: 0.55 and 0.75), predicting the study's real target, whose answer the run
  measured: does the prediction interval of B_noise and of the critical batch size hold the
  run's own estimate there, and is the predicted batch for 8 accelerators the run's (or inside
  the interval)? And the **compute**: the training steps the study would have cost had it stopped
  each trial at the easier target (the step its target held, plus the hold's window; a trial
  that never reached the easier target at the steps it ran: all of them, so pruning at the
  easier target's pace, sooner, would only cut more), against the steps every trial ran.

The same readings of the shipped quickstart (``examples/quickstart``, as ``study run --example
quickstart`` makes it: to 50%; held out 0.45, harder 0.55). Writes
``results/target_law_real.json`` (the questions read replace theirs) and prints one line per run.

Usage: python benchmarks/target_law_real.py [--questions mlp-nesterov cnn-adam] [--runs 6]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
from typing import Any  # noqa: E402

import pandas as pd  # noqa: E402
from answer_stability import QUESTIONS, RESULTS, table_path  # noqa: E402

from study.analysis.answers import study_answers  # noqa: E402
from study.analysis.crossings import trial_crossings  # noqa: E402
from study.analysis.surrogate import LAST_STEP, censored_trials  # noqa: E402
from study.analysis.target_prediction import target_scaling  # noqa: E402
from study.config.studyfile import load_study_file  # noqa: E402

HELD_OUT = {"mlp-nesterov": 0.55, "cnn-adam": 0.75, "quickstart": 0.45}
HARDER = {"mlp-nesterov": 0.65, "cnn-adam": 0.85, "quickstart": 0.55}
QUICKSTART = RESULTS.parent.parent / "examples" / "quickstart" / "optuna.journal"
"""The shipped quickstart (``study run --example quickstart``), one run."""
ACCELERATORS = 8
OUT = RESULTS / "target_law_real.json"


def read_run(question: str, k: int) -> dict[str, Any]:
    if question == "quickstart":
        table, config = quickstart()
    else:
        config = load_study_file(QUESTIONS[question])
        table = pd.read_csv(table_path(question, k, "even"))
    target = config.target  # with its hold rule
    full = target_scaling(
        table, target, predict=HARDER[question], accelerators=ACCELERATORS,
        overhead=config.overhead,
    )  # fmt: skip
    easier = dataclasses.replace(target, threshold=HELD_OUT[question])
    held = target_scaling(
        table, easier, predict=target.threshold, accelerators=ACCELERATORS,
        overhead=config.overhead,
    )  # fmt: skip
    cheap, full_steps = steps_to(table, easier), steps_to(table, target)
    measured = study_answers(table, target, accelerators=ACCELERATORS, overhead=config.overhead)
    noise, critical = full.laws["b_noise"], full.laws["critical_batch"]
    out: dict[str, Any] = {
        "run": k,
        "levels": [lv.threshold for lv in full.sweep.levels],
        "law": noise.kind if noise.ok else None,
        "exponent": None if noise.exponent is None else noise.exponent.to_dict(),
        "critical_exponent": None if critical.exponent is None else critical.exponent.to_dict(),
        "harder": full.prediction.to_dict() if full.prediction else None,
        "held_out": held.prediction.to_dict() if held.prediction else None,
        "held_out_law": held.laws["b_noise"].kind if held.laws["b_noise"].ok else None,
        "steps": {"held_out": cheap, "study": full_steps, "ratio": cheap / full_steps},
        "measured": {
            name: getattr(measured, name).to_dict()
            for name in ("b_noise", "critical_batch", "recommended_batch")
            if getattr(measured, name) is not None
        },
    }
    prediction = held.prediction
    if prediction is not None and prediction.ok and measured.ok:
        checks = (
            ("b_noise", prediction.b_noise, measured.b_noise),
            ("critical_batch", prediction.critical_batch, measured.critical_batch),
            ("recommended_batch", prediction.recommended_batch, measured.recommended_batch),
        )
        for name, predicted, actual in checks:
            if predicted is not None and actual is not None:
                out[f"{name}_covered"] = predicted.covers(actual.estimate)
                out[f"{name}_ratio"] = predicted.estimate / actual.estimate
    return out


def steps_to(table: pd.DataFrame, target: Any) -> int:
    """The training steps of every trial of ``table`` had each stopped at ``target`` (with its
    hold rule): where its target held plus the hold's window, at most the steps it ran."""
    trials = censored_trials(trial_crossings(table, target), table)
    ran = trials[LAST_STEP].to_numpy(float)
    reached = trials["steps_to_target"].to_numpy(float)
    hold = target.hold
    stop = [
        r + (hold.window(int(r)) if hold.active else 0) if math.isfinite(r) else math.inf
        for r in reached
    ]
    return int(sum(min(a, b) for a, b in zip(ran, stop, strict=True)))


def quickstart() -> tuple[pd.DataFrame, Any]:
    """The shipped quickstart's measurement table and study file."""
    from study.ledger import Ledger
    from study.report.stored import stored_config, stored_table

    ledger = Ledger.open(str(QUICKSTART), "quickstart", create=False)
    record = ledger.require()
    config = stored_config(record, "quickstart")
    return stored_table(ledger), dataclasses.replace(
        config, target=dataclasses.replace(config.target, hold=record.hold_rule)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", nargs="+", default=[*QUESTIONS, "quickstart"])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    results: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    for question in args.questions:
        rows = []
        for k in range(1 if question == "quickstart" else args.runs):
            row = read_run(question, k)
            rows.append(row)
            e = row["exponent"]
            print(
                f"{question} run {k}: law {row['law']}"
                + (
                    f" exponent {e['estimate']:.2f} ({e['low']:.2f} to {e['high']:.2f})"
                    if e
                    else ""
                )
                + f"; harder: {_line(row['harder'])}; held out: {_line(row['held_out'])}; "
                f"measured B_noise {row['measured'].get('b_noise', {}).get('estimate')}, "
                f"covered: B_noise {row.get('b_noise_covered')}, critical "
                f"{row.get('critical_batch_covered')}, "
                f"batch {row.get('recommended_batch_covered')}",
                flush=True,
            )
        covered = {
            name: sum(bool(r.get(f"{name}_covered")) for r in rows)
            for name in ("b_noise", "critical_batch", "recommended_batch")
        }
        ratios = [r["steps"]["ratio"] for r in rows]
        print(
            f"{question}: held-out study's steps / the study's: "
            + ", ".join(f"{x:.2f}" for x in ratios)
        )
        results[question] = {"runs": rows, "held_out_covered_of": len(rows), **covered}
    OUT.write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    print(json.dumps({q: {k: v for k, v in r.items() if k != "runs"} for q, r in results.items()}))


def _line(prediction: dict[str, Any] | None) -> str:
    if prediction is None:
        return "none"
    if not prediction["ok"]:
        return f"refused ({prediction['reason']})"
    b, c = prediction["b_noise"], prediction["critical_batch"]
    return (
        f"{prediction['assumption']}: B_noise {_num(b)}, critical {_num(c)}, "
        f"distance {prediction['distance']:.2f}"
    )


def _num(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "none"
    low, high = (math.inf if answer[k] is None else answer[k] for k in ("low", "high"))
    return f"{answer['estimate']:.3g} ({low:.3g}-{high:.3g})"


if __name__ == "__main__":
    main()
