"""Coverage of the extrapolation to a harder target, by simulation: does the prediction interval
`study report --predict-target` prints hold the truth at the asked-for coverage?

Each synthetic study (`sim.levels`: 7 batch sizes x 6 trials, trained to
``val_accuracy >= 0.6``, B_noise and S_min power laws in the error with exponents drawn per
study) is read as ``study report --targets auto --predict-target X`` reads it
(`target_scaling`: the model of every trial at the automatic levels, the laws, the prediction)
for X = 0.65, 0.7 and 0.75 (errors 0.35, 0.3 and 0.25), and each 95% prediction interval of
B_noise and of the critical batch size (20% overhead; the truth is ``0.2 * B_noise`` at this
S(B)'s knee ``q = 1``) is checked against the law's true value there: the interval the report
prints is for the answer at that target itself. The same sweep read at 80% intervals
(`LOWER`: each level's model redrawn at that confidence) checks the calibration below the
tails, and the 95% interval of B_noise's exponent is checked against ``-p``. At X = 0.7 a
verifying study (the same design and truth, new trials, trained to 0.7) is also run and read
with `study_answers`, as an expensive study would check the cheap one's prediction: whether
its estimates agree with the prediction (`agrees`: the two intervals combined, since the
verifying study has its own estimation noise: ``verify_*_agrees``), whether they fall inside
the printed interval itself (``verify_*_covers``: below 95% by that noise), and whether its
batch for 8 accelerators lies inside the predicted one's interval. Also counted: the refusals (beyond
the law's support, or without 3 levels with answers), the law chosen (power law or constant)
and how far each prediction reached (fitted ranges of ``log(1 - accuracy)``).

A study costs about 3 s of one core (6 levels, each a fit of the model of every trial).

Usage: python benchmarks/target_law_coverage.py [--studies 300] [--workers 1] [--seed 0]
    [--out benchmarks/results/target_law_coverage.json]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from sim.levels import LEVEL_DESIGN, TARGET, draw_level_truth, simulate_level_table  # noqa: E402

from study.analysis.answers import scaling_answers, study_answers  # noqa: E402
from study.analysis.target_law import agrees, fit_law  # noqa: E402
from study.analysis.target_levels import Level, TargetSweep  # noqa: E402
from study.analysis.target_prediction import predict_target, target_scaling  # noqa: E402
from study.config.target import Target  # noqa: E402

HERE = Path(__file__).resolve().parent
PREDICT = (0.65, 0.7, 0.75)
VERIFY = 0.7
"""The predicted target a verifying study is also run to (a new study, new trials)."""
OVERHEAD = 0.2
LOWER = 0.8
"""A second confidence level every study is also read at."""


def at_confidence(sweep: TargetSweep, confidence: float) -> TargetSweep:
    """The same sweep with every level's answers redrawn from its model at ``confidence``."""
    levels = tuple(
        Level(
            lv.target,
            scaling_answers(
                lv.answers.surrogate,
                accelerators=sweep.accelerators,
                confidence=confidence,
                overhead=sweep.overhead,
            ),
            lv.reached,
        )
        if lv.answers.surrogate is not None
        else lv
        for lv in sweep.levels
    )
    return TargetSweep(sweep.target, levels, sweep.accelerators, confidence, sweep.overhead)


def one_study(seed: int) -> dict[str, Any]:
    """Simulate, read and judge one study."""
    rng = np.random.default_rng(seed)
    truth = draw_level_truth(LEVEL_DESIGN, rng)
    table = simulate_level_table(truth, LEVEL_DESIGN, rng)
    scaling = target_scaling(table, Target.parse(TARGET), overhead=OVERHEAD)
    out: dict[str, Any] = {
        "seed": seed,
        "p": truth.p,
        "b_noise": truth.b_noise,
        "levels": [level.threshold for level in scaling.sweep.levels],
        "answered": len(scaling.sweep.answered()),
        "law": {q: law.kind if law.ok else None for q, law in scaling.laws.items()},
        "predictions": {},
    }
    exponent = scaling.laws["b_noise"].exponent
    if scaling.laws["b_noise"].ok and exponent is not None:
        out["exponent_covers"] = exponent.covers(-truth.p)
    lower = at_confidence(scaling.sweep, LOWER)
    noise = fit_law(lower, "b_noise")
    lower_laws = {
        "b_noise": noise,
        "critical_batch": fit_law(lower, "critical_batch", noise.kind if noise.ok else None),
    }
    for level in scaling.sweep.answered():
        b = level.answers.b_noise
        true = float(truth.b_noise_at(1.0 - level.threshold))
        out.setdefault("level_covers", []).append(bool(b is not None and b.covers(true)))
    for x in PREDICT:
        prediction = predict_target(scaling.sweep, scaling.laws, x)
        b_true = float(truth.b_noise_at(1.0 - x))
        row: dict[str, Any] = {"ok": prediction.ok, "distance": prediction.distance}
        if prediction.b_noise is not None:
            b = prediction.b_noise
            row["b_noise_log_z"] = math.log(b_true / b.estimate) / max(
                math.log(b.high / b.estimate), 1e-12
            )  # the truth in half-widths of the interval (|z| <= 1: covered)
        if prediction.ok:
            assert prediction.critical_batch is not None
            row["critical_covers"] = prediction.critical_batch.covers(OVERHEAD * b_true)
            row["critical_ratio"] = prediction.critical_batch.estimate / (OVERHEAD * b_true)
            if prediction.b_noise is not None:
                row["b_noise_covers"] = prediction.b_noise.covers(b_true)
                row["b_noise_ratio"] = prediction.b_noise.estimate / b_true
        else:
            row["reason"] = prediction.reason
        low = predict_target(lower, lower_laws, x)
        if low.ok and low.b_noise is not None and low.critical_batch is not None:
            row["b_noise_covers_80"] = low.b_noise.covers(b_true)
            row["critical_covers_80"] = low.critical_batch.covers(OVERHEAD * b_true)
        if x == VERIFY and prediction.ok:
            _verify(row, truth, x, prediction, seed)
        out["predictions"][str(x)] = row
    return out


def _verify(row: dict[str, Any], truth: Any, x: float, prediction: Any, seed: int) -> None:
    """Run the verifying study to ``x`` (its own trials) and check the prediction against its
    answers, as the expensive study of the issue would be checked."""
    rng = np.random.default_rng([seed, 1])
    table = simulate_level_table(truth, LEVEL_DESIGN, rng, stop=1.0 - x)
    target = Target.parse(TARGET.replace("0.6", f"{x:g}"))
    answers = study_answers(table, target, overhead=OVERHEAD)
    if not answers.ok:
        return
    row["verify_b_noise_covers"] = prediction.b_noise.covers(answers.b_noise.estimate)
    b = prediction.b_noise  # the verifying estimate in half-widths of the interval
    row["verify_b_noise_log_z"] = math.log(answers.b_noise.estimate / b.estimate) / max(
        math.log(b.high / b.estimate), 1e-12
    )
    row["verify_critical_covers"] = prediction.critical_batch.covers(
        answers.critical_batch.estimate
    )
    row["verify_b_noise_agrees"] = agrees(prediction.b_noise, answers.b_noise)
    row["verify_critical_agrees"] = agrees(prediction.critical_batch, answers.critical_batch)
    row["verify_batch_inside"] = prediction.recommended_batch.covers(
        answers.recommended_batch.estimate if answers.recommended_batch else math.nan
    )


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage per predicted target and quantity, with Monte Carlo standard errors."""
    summary: dict[str, Any] = {}
    for x in PREDICT:
        rows = [r["predictions"][str(x)] for r in results]
        made = [r for r in rows if r["ok"]]
        entry: dict[str, Any] = {
            "studies": len(rows),
            "predicted": len(made),
            "refused": len(rows) - len(made),
            "median_distance": float(np.median([r["distance"] for r in made])) if made else None,
        }
        for quantity, key in (
            ("b_noise", "b_noise_covers"),
            ("critical", "critical_covers"),
            ("b_noise_80", "b_noise_covers_80"),
            ("critical_80", "critical_covers_80"),
            ("verify_b_noise_agrees", "verify_b_noise_agrees"),
            ("verify_critical_agrees", "verify_critical_agrees"),
            ("verify_b_noise", "verify_b_noise_covers"),
            ("verify_critical", "verify_critical_covers"),
            ("verify_batch", "verify_batch_inside"),
        ):
            hits = [r[key] for r in made if key in r]
            ratios = [r[f"{quantity}_ratio"] for r in made if f"{quantity}_ratio" in r]
            if hits:
                share = float(np.mean(hits))
                entry[quantity] = {
                    "coverage": share,
                    "se": math.sqrt(share * (1 - share) / len(hits)),
                    "n": len(hits),
                    "median_ratio": float(np.median(ratios)) if ratios else None,
                }
        summary[str(x)] = entry
    kinds = [r["law"]["critical_batch"] for r in results]
    summary["law_chosen"] = {k or "none": kinds.count(k) for k in set(kinds)}
    exponent = [r["exponent_covers"] for r in results if "exponent_covers" in r]
    if exponent:
        share = float(np.mean(exponent))
        summary["b_noise_exponent"] = {
            "coverage": share,
            "se": math.sqrt(share * (1 - share) / len(exponent)),
            "n": len(exponent),
        }
    covers = [c for r in results for c in r.get("level_covers", [])]
    summary["per_level_b_noise_coverage"] = float(np.mean(covers)) if covers else None
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "target_law_coverage.json")
    args = parser.parse_args()
    started = time.perf_counter()
    seeds = [args.seed * 100_000 + k for k in range(args.studies)]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for k, result in enumerate(pool.map(one_study, seeds), 1):
            results.append(result)
            if k % 25 == 0 or k == len(seeds):
                report = {
                    "studies": k,
                    "seed": args.seed,
                    "seconds": round(time.perf_counter() - started),
                    "target": TARGET,
                    "predict": PREDICT,
                    "summary": summarize(results),
                    "studies_detail": results,
                }
                args.out.write_text(json.dumps(report, indent=1) + "\n")
                print(json.dumps(report["summary"]), flush=True)


if __name__ == "__main__":
    main()
