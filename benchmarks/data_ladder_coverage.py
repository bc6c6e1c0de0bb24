"""Coverage of the prediction at the next rung of a data ladder, by simulation: does the
interval `study ladder --predict` prints hold the answer at that size at the asked-for coverage?

Each synthetic ladder has rungs at training-set sizes ``D0 * 2^k`` (k = 0 .. rungs - 1). Its
truth follows power laws in the data size with exponents drawn per ladder::

    B_noise(D) = b0 (D / D0)^p          p  ~ U(0.2, 0.8)  (Zhang et al. 2024: CBS grows with D)
    S_min(D)   = s0 (D / D0)^p_s        p_s ~ U(-0.2, 0.3)
    lr*(B; D)  = l0 (D / D0)^p_lr (B / B_0)^alpha      p_lr ~ U(-0.5, 0)

and each rung is a synthetic study of `sim.simulate` (`DESIGN`: 8 batch sizes x 6 trials, the
jagged learning-rate response of a real seed) read with the model of every trial
(`fit_surrogate`, `scaling_answers`, 8 accelerators). The ladder's laws (`fit_ladder`) predict
the rung at ``2x`` and ``4x`` the largest (0.33 and 0.67 fitted ranges beyond four rungs), and
a verifying study is simulated there (new trials, same design). Each 95% interval of B_noise
and of the critical batch size (20% overhead; the truth is ``0.2 * B_noise`` at the knee
``q = 1``) is checked against the law's true value (``*_covers_truth``: what the printed
interval is for) and against the verifying study: whether its estimate agrees with the
prediction, the two intervals combined (``*_agrees_verify``, `agrees`: that study has its own
estimation noise), and whether it falls inside the printed interval itself
(``*_covers_verify``: below 95% by that noise); the predicted batch size for 8 accelerators
against the verifying study's (inside the interval). Every ladder is also read at 80%
intervals, to check the calibration away from the tails. The exponent of B_noise's law is checked against ``p`` (its interval covers it?).
Ladders of 2, 3 and 4 rungs are drawn in turn.

A ladder costs about 0.5 s of one core per study (rungs and verifying studies).

Usage: python benchmarks/data_ladder_coverage.py [--ladders 120] [--workers 1] [--seed 0]
    [--minutes 5] [--out benchmarks/results/data_ladder_coverage.json]
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
from sim.simulate import StudyDesign, StudyTruth, simulate_trials  # noqa: E402

from study.analysis.answers import Answers, scaling_answers  # noqa: E402
from study.analysis.data_ladder import fit_ladder  # noqa: E402
from study.analysis.data_law import Rung  # noqa: E402
from study.analysis.surrogate import fit_surrogate  # noqa: E402
from study.analysis.target_law import agrees  # noqa: E402

HERE = Path(__file__).resolve().parent
D0 = 10_000
FACTORS = (2.0, 4.0)
"""The predicted rungs, as multiples of the largest rung's data size."""
RUNGS = (2, 3, 4)
"""The ladders' lengths, drawn in turn."""
OVERHEAD = 0.2
ACCELERATORS = 8
LOWER = 0.8
"""A second confidence level every ladder is also read at (its coverage shows the calibration
below the tails)."""
DESIGN = StudyDesign(
    batch_sizes=tuple(2**k for k in range(4, 12)),
    trials_per_batch=6,
    jagged=0.1,
    b_noise_range=(48.0, 96.0),
)
"""Each rung's study: batch sizes 16-2048, 6 trials each, B_noise at the smallest rung drawn
on 48-96 (so that it stays inside the batch sizes up to 4x past four rungs)."""


def truth_at(base: StudyTruth, laws: dict[str, float], size: float) -> StudyTruth:
    """The rung's truth at data size ``size``."""
    r = size / D0
    return StudyTruth(
        s_min=base.s_min * r ** laws["p_s"],
        b_noise=base.b_noise * r ** laws["p"],
        alpha=base.alpha,
        lr_scale=base.lr_scale * r ** laws["p_lr"],
        knee=base.knee,
    )


def answers_of(truth: StudyTruth, rng: np.random.Generator) -> Answers:
    """One simulated study's answers (the model of every trial)."""
    trials = simulate_trials(truth, DESIGN, rng)
    return scaling_answers(
        fit_surrogate(trials),
        accelerators=ACCELERATORS,
        overhead=OVERHEAD,
        seed=int(rng.integers(2**31)),
    )


def one_ladder(seed: int) -> dict[str, Any]:
    """Simulate, fit and judge one ladder."""
    rng = np.random.default_rng(seed)
    n = RUNGS[seed % len(RUNGS)]
    laws = {
        "p": float(rng.uniform(0.2, 0.8)),
        "p_s": float(rng.uniform(-0.2, 0.3)),
        "p_lr": float(rng.uniform(-0.5, 0.0)),
    }
    base = StudyTruth(
        s_min=float(np.exp(rng.uniform(math.log(50.0), math.log(300.0)))),
        b_noise=float(np.exp(rng.uniform(*np.log(DESIGN.b_noise_range)))),
        alpha=float(rng.uniform(0.3, 1.0)),
        lr_scale=float(10.0 ** rng.uniform(-3.0, -2.0)),
    )
    sizes = [D0 * 2**k for k in range(n)]
    rungs = [Rung(f"d{s}", s, answers_of(truth_at(base, laws, s), rng)) for s in sizes]
    out: dict[str, Any] = {"seed": seed, "rungs": n, **laws, "predictions": {}}
    if not all(r.ok for r in rungs):
        out["skipped"] = "a rung's model gave no answers"
        return out
    ladder = fit_ladder(rungs)
    lower = fit_ladder(
        [Rung(r.study, r.data_size, at_level(r.answers, LOWER)) for r in rungs], confidence=LOWER
    )
    out["rung_b_noise_z"] = [
        _z(r.answers.b_noise, truth_at(base, laws, r.data_size).b_noise) for r in rungs
    ]
    law = ladder.laws["b_noise"]
    if law.ok and law.exponent is not None:
        out["exponent"] = law.exponent.estimate
        out["exponent_covers"] = law.exponent.covers(laws["p"])
        out["exponent_width"] = law.exponent.high - law.exponent.low
    for factor in FACTORS:
        size = sizes[-1] * factor
        prediction = ladder.predict(size)
        row: dict[str, Any] = {"ok": prediction.ok, "distance": prediction.distance}
        if not prediction.ok:
            row["reason"] = prediction.reason
            out["predictions"][str(factor)] = row
            continue
        truth = truth_at(base, laws, size)
        verify = answers_of(truth, rng)
        b, c = prediction.b_noise, prediction.critical_batch
        assert b is not None and c is not None and prediction.recommended_batch is not None
        row["b_noise_covers_truth"] = b.covers(truth.b_noise)
        row["critical_covers_truth"] = c.covers(OVERHEAD * truth.b_noise)
        row["b_noise_ratio"] = b.estimate / truth.b_noise
        row["b_noise_width"] = math.log(b.high / b.low)
        if verify.ok:
            assert verify.b_noise is not None and verify.critical_batch is not None
            row["b_noise_covers_verify"] = b.covers(verify.b_noise.estimate)
            row["b_noise_agrees_verify"] = agrees(b, verify.b_noise)
            row["critical_agrees_verify"] = agrees(c, verify.critical_batch)
            row["b_noise_z_verify"] = _z(b, verify.b_noise.estimate)
            row["b_noise_z_truth"] = _z(b, truth.b_noise)
            row["critical_covers_verify"] = c.covers(verify.critical_batch.estimate)
            if verify.recommended_batch is not None:
                row["batch_inside_verify"] = prediction.recommended_batch.covers(
                    verify.recommended_batch.estimate
                )
                row["batch_equal_verify"] = (
                    prediction.recommended_batch.estimate == verify.recommended_batch.estimate
                )
            low = lower.predict(size)
            assert low.b_noise is not None and low.critical_batch is not None
            row["b_noise_covers_verify_80"] = low.b_noise.covers(verify.b_noise.estimate)
            row["critical_covers_verify_80"] = low.critical_batch.covers(
                verify.critical_batch.estimate
            )
            row["b_noise_covers_truth_80"] = low.b_noise.covers(truth.b_noise)
            row["critical_covers_truth_80"] = low.critical_batch.covers(OVERHEAD * truth.b_noise)
        out["predictions"][str(factor)] = row
    return out


def at_level(answers: Answers, confidence: float) -> Answers:
    """The same model's answers with intervals at another ``confidence``."""
    assert answers.surrogate is not None
    return scaling_answers(
        answers.surrogate, accelerators=ACCELERATORS, overhead=OVERHEAD, confidence=confidence
    )


def _z(answer: Any, value: float) -> float:
    """Where ``value`` lies in half-widths of ``answer``'s interval, in log units, on its own
    side (|z| <= 1: covered)."""
    end = answer.high if value >= answer.estimate else answer.low
    return math.log(value / answer.estimate) / max(abs(math.log(end / answer.estimate)), 1e-12)


KEYS = (
    "b_noise_agrees_verify",
    "critical_agrees_verify",
    "b_noise_covers_verify",
    "critical_covers_verify",
    "b_noise_covers_truth",
    "critical_covers_truth",
    "batch_inside_verify",
    "batch_equal_verify",
    "b_noise_covers_verify_80",
    "critical_covers_verify_80",
    "b_noise_covers_truth_80",
    "critical_covers_truth_80",
)


def _share(hits: list[bool]) -> dict[str, Any]:
    share = float(np.mean(hits))
    return {"share": share, "se": math.sqrt(share * (1 - share) / len(hits)), "n": len(hits)}


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage per ladder length and predicted factor, with Monte Carlo standard errors."""
    summary: dict[str, Any] = {}
    for n in RUNGS:
        mine = [r for r in results if r["rungs"] == n and "skipped" not in r]
        entry: dict[str, Any] = {"ladders": len(mine)}
        covers = [r["exponent_covers"] for r in mine if "exponent_covers" in r]
        if covers:
            errors = [r["exponent"] - r["p"] for r in mine if "exponent" in r]
            entry["exponent"] = {
                **_share(covers),
                "median_error": float(np.median(errors)),
                "median_abs_error": float(np.median(np.abs(errors))),
                "median_width": float(np.median([r["exponent_width"] for r in mine])),
            }
        for factor in FACTORS:
            rows = [r["predictions"][str(factor)] for r in mine]
            made = [row for row in rows if row["ok"]]
            f_entry: dict[str, Any] = {"predicted": len(made), "refused": len(rows) - len(made)}
            if made:
                f_entry["median_distance"] = float(np.median([row["distance"] for row in made]))
                f_entry["median_b_noise_ratio"] = float(
                    np.median([row["b_noise_ratio"] for row in made])
                )
            for key in KEYS:
                hits = [row[key] for row in made if key in row]
                if hits:
                    f_entry[key] = _share(hits)
            entry[f"{factor:g}x"] = f_entry
        summary[f"{n} rungs"] = entry
    for key in KEYS:
        hits = [
            row[key]
            for r in results
            if "skipped" not in r
            for row in r["predictions"].values()
            if key in row
        ]
        if hits:
            summary[f"all_{key}"] = _share(hits)
    rung_z = [abs(z) for r in results for z in r.get("rung_b_noise_z", [])]
    if rung_z:
        summary["rung_b_noise"] = {
            **_share([z <= 1 for z in rung_z]),
            "median_abs_z": float(np.median(rung_z)),
        }
    for key in ("b_noise_z_verify", "b_noise_z_truth"):
        zs = [abs(row[key]) for r in results for row in r["predictions"].values() if key in row]
        if zs:
            summary[f"median_abs_{key}"] = float(np.median(zs))
    summary["skipped"] = sum("skipped" in r for r in results)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladders", type=int, default=120)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=5.0, help="stop after this long")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "data_ladder_coverage.json")
    args = parser.parse_args()
    started = time.perf_counter()
    seeds = [args.seed * 100_000 + k for k in range(args.ladders)]
    results: list[dict[str, Any]] = []
    with ProcessPoolExecutor(args.workers) as pool:
        for k, result in enumerate(pool.map(one_ladder, seeds), 1):
            results.append(result)
            late = time.perf_counter() - started > 60 * args.minutes
            if k % 10 == 0 or k == len(seeds) or late:
                report = {
                    "ladders": k,
                    "seed": args.seed,
                    "seconds": round(time.perf_counter() - started),
                    "factors": FACTORS,
                    "summary": summarize(results),
                    "ladders_detail": results,
                }
                args.out.write_text(json.dumps(report, indent=1) + "\n")
                print(json.dumps(report["summary"]), flush=True)
            if late:
                pool.shutdown(wait=False, cancel_futures=True)
                break


if __name__ == "__main__":
    main()
