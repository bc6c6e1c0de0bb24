"""Judge the surrogate's intervals by simulation: does every answer's 95% interval hold the truth
95% of the time?

`answer_outcomes` draws one synthetic study (`sim.simulate`, with the jagged learning-rate
response and the bend of the design), fits `fit_surrogate` to all of its trials, reads
`scaling_answers` and compares every interval with the generating truth:

* ``B_noise``, ``S_min``, ``E_min`` and the critical batch size (`overhead_batch_size` at the
  generating knee): the generating curve's (the
  model's S(B) is the median at the best rate, as the generating one is);
* ``alpha``: the least-squares slope of the generating ``log lr*(B)`` over the design's batch
  sizes; ``sigma``: ``sqrt(noise**2 + jagged**2 / 2)``;
* the end of perfect scaling, the start of maximal data parallelism and the batch size for N
  accelerators: the rules applied to the generating curve on the batch sizes that reached the
  target; the learning rate and step speed-up at the recommended batch size: the generating
  ones there (the speed-up only where that batch size is not the smallest itself: a speed-up of
  exactly 1 over itself holds the truth whatever the draws).

`answer_coverage` repeats that over many studies. An interval of the S(B) curve whose end is
the model's search range is printed open ("at least 66", `scaling_answers`): its coverage is
counted apart from the printed two-sided intervals'.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.coverage import Outcome, coverage_share
from sim.simulate import StudyDesign, StudyTruth, draw_truth, log_best_lr, simulate_trials
from study.analysis.answers import Answers, overhead_batch_size, scaling_answers
from study.analysis.fitting import CONFIDENCE
from study.analysis.regimes import TOLERANCE, regime_bounds
from study.analysis.surrogate import fit_surrogate

ANSWERS = (
    "b_noise", "s_min", "e_min", "alpha", "sigma", "critical_batch", "perfect_end",
    "max_parallel_start", "recommended_batch", "recommended_lr", "step_speedup",
)  # fmt: skip
"""The answers checked, in the order of a coverage table."""


def true_answers(
    truth: StudyTruth, design: StudyDesign, answers: Answers, reached: np.ndarray
) -> dict[str, float]:
    """The generating value of every answer of ``answers`` (see the module)."""
    sizes = np.asarray(design.batch_sizes, dtype=float)
    x = np.log(sizes)
    y = np.array([log_best_lr(truth, design, b) for b in sizes])
    xc = x - x.mean()
    curve = truth.steps(reached)[None, :]
    k, start = regime_bounds(reached, curve, answers.tolerance)
    perfect_end = float(reached[k[0]])
    out = {
        "b_noise": truth.b_noise,
        "s_min": truth.s_min,
        "e_min": truth.e_min,
        "alpha": float((y - y.mean()) @ xc / (xc @ xc)),
        "sigma": math.sqrt(design.noise**2 + design.jagged**2 / 2.0),
        "critical_batch": float(overhead_batch_size(truth.b_noise, truth.knee, answers.overhead)),
        "perfect_end": perfect_end,
        "max_parallel_start": float(reached[start[0]]) if start[0] >= 0 else math.inf,
    }
    divisible = reached[np.mod(reached, answers.accelerators) == 0]
    if divisible.size and answers.recommended_batch is not None:
        limit = max(perfect_end, out["critical_batch"])
        within = divisible[divisible <= limit]
        out["recommended_batch"] = float(within.max() if within.size else divisible.min())
        pick, base = answers.recommended_batch.estimate, float(reached[0])
        out["recommended_lr"] = math.exp(log_best_lr(truth, design, pick))
        if pick != base:
            out["step_speedup"] = truth.speedup(base, pick)
    return out


def answer_outcomes(
    design: StudyDesign,
    rng: np.random.Generator,
    *,
    accelerators: int = 8,
    confidence: float = CONFIDENCE,
    tolerance: float = TOLERANCE,
) -> list[Outcome]:
    """One synthetic study's answers against the truth (none when the model could not fit)."""
    truth = draw_truth(design, rng)
    trials = simulate_trials(truth, design, rng)
    surrogate = fit_surrogate(trials)
    answers = scaling_answers(
        surrogate,
        accelerators=accelerators,
        confidence=confidence,
        tolerance=tolerance,
        seed=int(rng.integers(2**31)),
    )
    if not answers.ok:
        return []
    reached = np.asarray(surrogate.reached_batch_sizes, dtype=float)
    truths = true_answers(truth, design, answers, reached)
    out = []
    for name in ANSWERS:
        answer = getattr(answers, name)
        if answer is not None and name in truths:
            out.append(
                Outcome(
                    name,
                    truths[name],
                    answer.estimate,
                    answer.low,
                    answer.high,
                    open=not answer.bounded,
                )
            )
    return out


def answer_coverage(
    design: StudyDesign, studies: int, *, seed: int = 0, accelerators: int = 8
) -> pd.DataFrame:
    """Per answer: ``studies`` counted, ``coverage`` (share of its printed intervals holding the
    truth) and its Monte Carlo ``se``, ``exact`` (share of estimates equal to the truth, for
    the batch-size answers), and for a continuous answer the share printed ``open`` (an end
    infinite: "at least 66") and the share of those that held (``open_held``); ``studies``,
    ``coverage`` and ``se`` count the two-sided intervals alone."""
    rng = np.random.default_rng(seed)
    outcomes = [
        o for _ in range(studies) for o in answer_outcomes(design, rng, accelerators=accelerators)
    ]
    rows = []
    for name in ANSWERS:
        mine = [o for o in outcomes if o.parameter == name]
        exact = float(np.mean([o.estimate == o.truth for o in mine])) if mine else math.nan
        batch = name in BATCH_ANSWERS
        opened = [o for o in mine if not batch and not _two_sided(o)]
        shown = [o for o in mine if batch or _two_sided(o)]
        rows.append(
            {
                "answer": name,
                **coverage_share(shown),
                "exact": exact,
                "open": len(opened) / len(mine) if mine else math.nan,
                "open_held": float(np.mean([o.covered for o in opened])) if opened else math.nan,
            }
        )
    return pd.DataFrame(rows)


BATCH_ANSWERS = ("perfect_end", "max_parallel_start", "recommended_batch")
"""The answers read on the measured batch sizes (an infinite end: "beyond the measured sizes")."""


def _two_sided(outcome: Outcome) -> bool:
    return not outcome.open
