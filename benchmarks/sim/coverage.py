"""Judge the fits' intervals by simulation: how often does a stated 95% interval hold the truth?

`study_outcomes` draws one synthetic study (`sim.simulate`), runs the same analysis a
report runs (`fit_noise_scale_from_trials` on the trials with their evaluation brackets,
`summarize_trials`, `recommend`, `fit_lr_power_law` on the best learning rates) and compares
every interval with the truth. `coverage` repeats that over many studies.

The truth of each parameter:

* ``B_noise``, ``alpha``: the generating values.
* ``speed-up``: ``S(base) / S(chosen)`` of the generating curve, for the batch size the
  recommendation chose (studies where it chose the baseline itself, a speed-up of exactly 1,
  are not counted).
* ``S_min``, ``E_min``: those of the curve a search of this design finds on average, the
  generating values times `best_of_n_factor`: steps to result is a best of N trials, so a
  larger search finds fewer steps, and no fit of the best trials can tell by how much.
  ``S_min (generating)`` compares the same interval with the generating value instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.simulate import (
    StudyDesign,
    best_of_n_factor,
    draw_truth,
    simulate_trials,
)
from study.analysis.fitting import CONFIDENCE, MIN_BATCH_SIZES
from study.analysis.lr_scaling import fit_lr_power_law
from study.analysis.measures import summarize_trials
from study.analysis.noise_scale import fit_noise_scale_from_trials
from study.analysis.recommend import recommend
from study.analysis.table import BATCH_SIZE

PARAMETERS = (
    "B_noise",
    "S_min",
    "E_min",
    "alpha",
    "alpha (edge rates left out)",
    "speed-up",
    "S_min (generating)",
)
"""The rows of a `coverage` table, in order."""

ACCELERATORS = 8
"""The speed-up is the one `recommend` gives for this many accelerators."""


@dataclass(frozen=True)
class Outcome:
    """One interval of one synthetic study against the truth."""

    parameter: str
    truth: float
    estimate: float
    low: float
    high: float
    open: bool = False
    """An end of the interval is printed open ("at least 66"; `Answer.bounded`)."""

    @property
    def covered(self) -> bool:
        return self.low <= self.truth <= self.high

    @property
    def on_edge(self) -> bool:
        """The estimate sits on an end of its interval (one-sided), within 1e-9 relative."""
        tol = 1e-9 * max(abs(self.estimate), 1e-300)
        return abs(self.estimate - self.low) <= tol or abs(self.high - self.estimate) <= tol

    @property
    def width(self) -> float:
        """``high / low`` for the positive parameters, ``high - low`` for alpha."""
        return self.high - self.low if self.parameter.startswith("alpha") else self.high / self.low


def study_outcomes(
    design: StudyDesign,
    rng: np.random.Generator,
    *,
    factor: float,
    confidence: float = CONFIDENCE,
) -> list[Outcome]:
    """Draw one study, analyse it as a report does and compare each interval with its truth.

    ``factor`` is `best_of_n_factor` of ``design`` (computed once per design). A parameter
    whose fit failed (too few batch sizes reached the target) gives no outcome.
    """
    truth = draw_truth(design, rng)
    trials = simulate_trials(truth, design, rng)
    fit = fit_noise_scale_from_trials(trials, confidence=confidence)
    out: list[Outcome] = []
    if not fit.ok:
        return out
    for name, true_value, estimate, ci in (
        ("B_noise", truth.b_noise, fit.b_noise, fit.b_noise_ci),
        ("S_min", factor * truth.s_min, fit.s_min, fit.s_min_ci),
        ("E_min", factor * truth.e_min, fit.e_min, fit.e_min_ci),
        ("S_min (generating)", truth.s_min, fit.s_min, fit.s_min_ci),
    ):
        out.append(Outcome(name, true_value, estimate, *ci))
    steps = summarize_trials(trials)
    rates = steps[np.isfinite(steps["best_learning_rate"].to_numpy(dtype=float))]
    on_edge = rates["lr_on_edge"].astype(bool)
    for name, used in (
        ("alpha", rates),
        ("alpha (edge rates left out)", _without_edges(rates, on_edge)),
    ):
        lr = fit_lr_power_law(used[BATCH_SIZE], used["best_learning_rate"], confidence=confidence)
        if lr.ok and lr.alpha_ci is not None:
            out.append(Outcome(name, truth.alpha, lr.alpha, *lr.alpha_ci))
    rec = recommend(steps, fit, None, ACCELERATORS)
    if rec.ok and rec.step_speedup_ci is not None and rec.batch_size != rec.base_batch_size:
        true_speedup = truth.speedup(float(rec.base_batch_size), float(rec.batch_size))
        out.append(Outcome("speed-up", true_speedup, rec.step_speedup, *rec.step_speedup_ci))
    return out


def coverage(
    design: StudyDesign,
    studies: int,
    *,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> pd.DataFrame:
    """Coverage of every parameter's interval over ``studies`` synthetic studies of ``design``.

    Returns:
        One row per parameter (in `PARAMETERS` order): ``parameter``, ``studies`` (those with
        an interval), ``coverage`` (share holding the truth), ``se`` (its Monte Carlo standard
        error), ``median_width`` (see `Outcome.width`) and ``on_edge`` (share of one-sided
        intervals); and the design's ``best_of_n_factor`` on every row.
    """
    rng = np.random.default_rng(seed)
    factor = best_of_n_factor(design)
    outcomes = [
        o
        for _ in range(studies)
        for o in study_outcomes(design, rng, factor=factor, confidence=confidence)
    ]
    rows = []
    for name in PARAMETERS:
        mine = [o for o in outcomes if o.parameter == name]
        rows.append(
            {
                "parameter": name,
                **coverage_share(mine),
                "median_width": float(np.median([o.width for o in mine])) if mine else math.nan,
                "on_edge": float(np.mean([o.on_edge for o in mine])) if mine else math.nan,
                "best_of_n_factor": factor,
            }
        )
    return pd.DataFrame(rows)


def _without_edges(rates: pd.DataFrame, on_edge: pd.Series) -> pd.DataFrame:
    """The report's rule: leave out best rates on their search range's edge while at least
    `MIN_BATCH_SIZES` batch sizes remain."""
    if on_edge.any() and rates.loc[~on_edge, BATCH_SIZE].nunique() >= MIN_BATCH_SIZES:
        return rates[~on_edge]
    return rates


def coverage_share(outcomes: list[Outcome]) -> dict[str, float]:
    """``studies`` (how many outcomes), ``coverage`` (the share holding the truth) and ``se``
    (its Monte Carlo standard error); NaN without outcomes."""
    if not outcomes:
        return {"studies": 0, "coverage": math.nan, "se": math.nan}
    share = float(np.mean([o.covered for o in outcomes]))
    se = math.sqrt(share * (1.0 - share) / len(outcomes))
    return {"studies": len(outcomes), "coverage": share, "se": se}
