"""Synthetic scaling studies with a known truth, for judging how well intervals cover it.

A synthetic study follows McCandlish et al.'s ``S(B) = s_min (1 + b_noise / B)`` (or, with a
``knee`` other than 1, ``s_min (1 + (b_noise / B) ** knee) ** (1 / knee)``) and a best
learning rate ``lr*(B) = lr_scale (B / B_0) ** alpha`` (``B_0`` the smallest batch size). Each
batch size gets ``trials_per_batch`` trials from a random search of the learning rate around a
guess of ``lr*(B)``; a trial at learning rate ``lr`` first meets the target after

    ``T = S(B) * exp(lr_sensitivity * ln(lr / lr*(B)) ** 2 + noise * z)``,  ``z ~ N(0, 1)``

steps (continuous), diverges when ``lr > diverge_above * lr*(B)``, and does not reach the target
within its budget when ``T > budget * S(B)`` (or ``budget * S(B_0)`` at every batch size, as a
study file's ``max_steps``, with ``budget_at_smallest``). The study only sees ``T`` through its
evaluation grid (`EvalCadence` with ``geometric:eval_ratio``): the first evaluation at or after
``T`` (with ``fine``, every step: the study runner's fine evaluation near the target reads the
crossing to the step). With ``pruning`` a batch size's trials run one after another and each
stops at the first evaluation at or past the fewest steps an earlier one reached the target in
(the study runner's rule, `study.runner.pruning`): it says "more than N steps", as a pruned
trial of a real study.

The search is placed the same way relative to ``lr*(B)`` at every batch size, so the best of a
batch size's trials is ``S(B)`` times a factor drawn from one distribution at every batch size:
the expected best-of-N curve is ``best_of_n_factor(design) * S(B)``, which has the same
``b_noise`` and ``alpha`` and a ``s_min`` scaled by that factor.

`simulate_trials` gives one row per trial (the columns of `trial_steps_to_target` plus
``previous_step`` and the true ``crossing``) and is fast enough for thousands of studies;
`simulate_table` gives the same trials as the standard measurement table, curves and all.

Example::

    design = StudyDesign(batch_sizes=(8, 32, 128, 512, 2048), trials_per_batch=6)
    truth = draw_truth(design, rng)
    trials = simulate_trials(truth, design, rng)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from study.analysis.crossings import PREVIOUS_STEP
from study.analysis.table import (
    BATCH_SIZE,
    EXAMPLES,
    LEARNING_RATE,
    REPLICAS,
    STATE,
    STEP,
    STRATEGY,
    STUDY,
    TRAIN_LOSS,
    TRAIN_SECONDS,
    TRIAL,
    TUNER,
)
from study.config.study import PRUNE_SLACK
from study.config.trial import EvalCadence

TARGET = "val_accuracy>=0.6"
"""The target every synthetic trial is measured against."""

_THRESHOLD = 0.6
_SECONDS_PER_STEP = 1e-3
"""Seconds per step at a batch size of 256 (time grows with the batch: ``(1 + B / 256) / 2``)."""


@dataclass(frozen=True)
class StudyDesign:
    """How a synthetic study searches and measures.

    Fields: ``batch_sizes``; ``trials_per_batch``; ``eval_ratio`` (geometric evaluation grid);
    ``noise`` (standard deviation of log steps between trials at the same learning rate);
    ``lr_sensitivity`` (log steps grow by this times ``ln(lr / lr*)**2``: 0.7 costs 40% more
    steps at twice or half the best rate); ``lr_window`` (the search draws ``log10 lr``
    uniformly within this many decades either side of its centre); ``lr_centre_error`` (the
    centre misses ``log10 lr*`` by a normal error of this many decades, per batch size);
    ``diverge_above`` (rates above this times ``lr*`` diverge); ``budget`` (step budget as a
    multiple of ``S(B)``); ``jagged`` (amplitude, in log steps, of the jagged response to the
    learning rate a fixed training seed shows: a sinusoid of ``log lr`` with a period of 5% in
    the rate and a phase drawn per trial, as each trial draws its own seed); ``bend`` (the best
    rate's curvature in log-log around the batch sizes' geometric mean: 0 is a power law, below
    0 it falls again at large batch sizes); ``knee`` (the sharpness ``q`` of
    ``S(B) = s_min (1 + (b_noise / B) ** q) ** (1 / q)``: 1 is McCandlish et al.'s curve, larger
    keeps perfect scaling longer and turns more abruptly); ``budget_at_smallest`` (the budget is
    ``budget * S(B_0)`` steps at every batch size, ``B_0`` the smallest: a study file's
    ``max_steps``, tight at small batch sizes and loose at large ones); ``fine`` (every step is
    evaluated, as the study runner does once a trial nears the target, so a reached trial's
    bracket is one step wide); ``pruning`` (see the
    module) and ``prune_slack`` (a trial is stopped at this many times its batch size's best so
    far, as ``tuner.prune_slack``); ``b_noise_range`` (the range `draw_truth` draws ``b_noise`` from; None: between
    the second smallest and the second largest batch size); ``knee_range`` (the range
    `draw_truth` draws the knee's ``q`` from, log-uniformly; None: ``knee`` in every study).

    Example: the quickstart's design (`search_spaces/quickstart.yaml`: 4 batch sizes x 6
    trials, a 2000-step budget, pruning) is ``StudyDesign(batch_sizes=(8, 32, 128, 512),
    trials_per_batch=6, budget=1.6, budget_at_smallest=True, fine=True, pruning=True)``.
    """

    batch_sizes: tuple[int, ...] = tuple(2**k for k in range(3, 13))
    trials_per_batch: int = 8
    eval_ratio: float = 1.05
    noise: float = 0.1
    lr_sensitivity: float = 0.7
    lr_window: float = 0.5
    lr_centre_error: float = 0.15
    diverge_above: float = 3.0
    budget: float = 10.0
    jagged: float = 0.0
    bend: float = 0.0
    knee: float = 1.0
    budget_at_smallest: bool = False
    fine: bool = False
    pruning: bool = False
    prune_slack: float = 1.0
    b_noise_range: tuple[float, float] | None = None
    knee_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if len(self.batch_sizes) < 2 or any(b < 1 for b in self.batch_sizes):
            raise ValueError(
                f"batch_sizes must hold at least 2 sizes >= 1 (got {self.batch_sizes})"
            )
        if self.trials_per_batch < 1:
            raise ValueError(f"trials_per_batch must be >= 1 (got {self.trials_per_batch})")
        if (
            self.b_noise_range is not None
            and not 0 < self.b_noise_range[0] <= self.b_noise_range[1]
        ):
            raise ValueError(
                f"b_noise_range must be (low, high) with 0 < low <= high (got {self.b_noise_range})"
            )
        if self.knee_range is not None and not 1 <= self.knee_range[0] <= self.knee_range[1]:
            raise ValueError(
                f"knee_range must be (low, high) with 1 <= low <= high (got {self.knee_range})"
            )

    def budget_steps(self, truth: StudyTruth, batch_size: float) -> int:
        """The step budget of a trial at ``batch_size`` (see ``budget_at_smallest``)."""
        basis = min(self.batch_sizes) if self.budget_at_smallest else batch_size
        return max(1, math.ceil(self.budget * float(truth.steps(basis))))

    def evaluations(self, budget: int) -> np.ndarray:
        """The steps a trial with this ``budget`` is evaluated at (see ``fine``)."""
        return np.arange(budget + 1.0) if self.fine else evaluation_steps(budget, self.eval_ratio)


@dataclass(frozen=True)
class StudyTruth:
    """The generating values of a synthetic study.

    Example: ``StudyTruth(100, 256, 0.5, 0.01).steps(256) == 200``.
    """

    s_min: float
    b_noise: float
    alpha: float
    lr_scale: float
    """``lr*`` at the smallest batch size of the design."""
    knee: float = 1.0
    """The sharpness ``q`` of S(B) (see `StudyDesign`)."""

    @property
    def e_min(self) -> float:
        return self.s_min * self.b_noise

    def steps(self, batch_size: float | np.ndarray) -> np.ndarray:
        """``S(B) = s_min (1 + (b_noise / B) ** knee) ** (1 / knee)``."""
        ratio = self.b_noise / np.asarray(batch_size, dtype=float)
        return self.s_min * (1.0 + ratio**self.knee) ** (1.0 / self.knee)

    def speedup(self, base: float, chosen: float) -> float:
        """``S(base) / S(chosen)``: how many times fewer steps ``chosen`` needs."""
        return float(self.steps(base) / self.steps(chosen))


def draw_truth(design: StudyDesign, rng: np.random.Generator) -> StudyTruth:
    """A random truth whose knee lies inside the measured batch sizes.

    ``s_min`` log-uniform on [20, 500] steps; ``b_noise`` log-uniform between the second
    smallest and the second largest batch size (or on ``design.b_noise_range``); ``alpha``
    uniform on [0.3, 1]; ``lr_scale`` log-uniform on [0.001, 0.01]; ``knee`` the design's, or
    log-uniform on ``design.knee_range`` (drawn last, so a design without it draws as before).
    """
    b = np.sort(np.asarray(design.batch_sizes, dtype=float))
    low, high = (b[1], b[-2]) if b.size >= 4 else (b[0], b[-1])
    if design.b_noise_range is not None:
        low, high = design.b_noise_range
    s_min = float(np.exp(rng.uniform(math.log(20.0), math.log(500.0))))
    b_noise = float(np.exp(rng.uniform(math.log(low), math.log(high))))
    alpha = float(rng.uniform(0.3, 1.0))
    lr_scale = float(10.0 ** rng.uniform(-3.0, -2.0))
    knee = design.knee
    if design.knee_range is not None:
        knee = float(np.exp(rng.uniform(*np.log(design.knee_range))))
    return StudyTruth(s_min, b_noise, alpha, lr_scale, knee)


def evaluation_steps(last: int, ratio: float) -> np.ndarray:
    """The evaluation steps of ``EvalCadence(ratio=ratio)`` from 0 up to and including ``last``.

    Example: ``evaluation_steps(30, 1.1)`` is 0, 1, ..., 11, 13, 15, 17, 19, 21, 24, 27, 30
    (the last step is always evaluated: the budget ends there).
    """
    cadence = EvalCadence(kind="geometric", ratio=ratio)
    steps = [0]
    while steps[-1] < last:
        steps.append(min(last, cadence.next_step(steps[-1])))
    return np.array(steps, dtype=float)


def simulate_trials(
    truth: StudyTruth, design: StudyDesign, rng: np.random.Generator
) -> pd.DataFrame:
    """One row per trial, as `trial_crossings` gives for a real study, plus the truth.

    Columns: ``study``, ``batch_size``, ``trial``, ``strategy``, ``replicas``, ``tuner``,
    ``learning_rate``, ``state`` (``reached``, ``not_reached``, ``pruned`` or ``diverged``),
    ``reached``, ``steps_to_target`` (the first evaluation at or after the crossing; ``inf`` if
    none), ``previous_step`` (the evaluation before it), ``last_step`` (the last step it ran: its
    first hit, its budget, where it was pruned, or 3 for a diverged one), ``examples_to_target``,
    ``seconds_to_target`` and ``crossing`` (the true, continuous crossing step; ``inf`` for a
    diverged trial, beyond the budget for one not reached).
    """
    rows = []
    trial = 0
    for b in design.batch_sizes:
        s_b = float(truth.steps(b))
        budget = design.budget_steps(truth, b)
        grid = design.evaluations(budget)
        log_lr, crossing, diverged = _search(truth, design, b, s_b, rng)
        index = np.searchsorted(grid, crossing, side="left")
        reached = (~diverged) & (index < grid.size)
        first = np.where(reached, grid[np.minimum(index, grid.size - 1)], math.inf)
        previous = np.where(reached, grid[np.maximum(index - 1, 0)], math.nan)
        stop = (
            _pruned_at(first, diverged, grid, design.prune_slack)
            if design.pruning
            else np.full(first.size, np.inf)
        )
        pruned = np.isfinite(stop)
        reached &= ~pruned
        first = np.where(pruned, math.inf, first)
        previous = np.where(pruned, math.nan, previous)
        seconds = _seconds_per_step(b)
        for k in range(design.trials_per_batch):
            state = (
                "diverged"
                if diverged[k]
                else "pruned"
                if pruned[k]
                else ("reached" if reached[k] else "not_reached")
            )
            last = first[k] if reached[k] else (3 if diverged[k] else min(stop[k], budget))
            rows.append(
                {
                    STUDY: "synthetic",
                    BATCH_SIZE: int(b),
                    TRIAL: trial,
                    STRATEGY: "default",
                    REPLICAS: 1,
                    TUNER: "random",
                    LEARNING_RATE: float(np.exp(log_lr[k])),
                    STATE: state,
                    "reached": bool(reached[k]),
                    "steps_to_target": float(first[k]),
                    PREVIOUS_STEP: float(previous[k]),
                    "last_step": float(last),
                    "examples_to_target": float(first[k]) * b,
                    "seconds_to_target": float(first[k]) * seconds,
                    "crossing": math.inf if diverged[k] else float(crossing[k]),
                }
            )
            trial += 1
    return pd.DataFrame(rows)


def simulate_table(
    truth: StudyTruth, design: StudyDesign, rng: np.random.Generator
) -> pd.DataFrame:
    """The trials of `simulate_trials` (same ``rng`` state, same draws) as a measurement table.

    ``val_accuracy = 0.6 * sqrt(step / crossing)`` (at most 0.9) at every evaluation step, so
    ``trial_steps_to_target(table, Target.parse(TARGET))`` gives back the trials'
    ``steps_to_target``. A reached trial stops at its first hit, as the study runner does; one
    not reached runs to its budget; a diverged one turns NaN after three evaluations.
    """
    trials = simulate_trials(truth, design, rng)
    frames = []
    for row in trials.itertuples(index=False):
        b = int(row.batch_size)
        steps = design.evaluations(design.budget_steps(truth, b))
        if row.state == "reached":
            steps = steps[steps <= row.steps_to_target]
        elif row.state == "pruned":
            steps = steps[steps <= row.last_step]
        elif row.state == "diverged":
            steps = steps[:4]
        accuracy = np.minimum(0.9, _THRESHOLD * np.sqrt(steps / row.crossing))
        if row.state == "diverged":
            accuracy[1:] = math.nan
        frames.append(
            pd.DataFrame(
                {
                    STUDY: row.study,
                    TRIAL: row.trial,
                    BATCH_SIZE: b,
                    STRATEGY: row.strategy,
                    REPLICAS: row.replicas,
                    TUNER: row.tuner,
                    STATE: row.state,
                    LEARNING_RATE: row.learning_rate,
                    STEP: steps.astype(int),
                    EXAMPLES: steps.astype(int) * b,
                    TRAIN_SECONDS: steps * _seconds_per_step(b),
                    TRAIN_LOSS: 2.0 * (1.0 - accuracy),
                    "val_accuracy": accuracy,
                    "val_loss": 2.2 * (1.0 - accuracy),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def best_of_n_factor(design: StudyDesign, *, draws: int = 200_000, seed: int = 12345) -> float:
    """``exp(E[log(best crossing / S(B))])`` for the design's search: the level of the
    expected best-of-N curve relative to ``S(B)`` (Monte Carlo over ``draws`` searches).

    The expectation is over searches where at least one trial reached the target (a batch size
    none reached is left out of a fit). Below 1 when the trial noise dominates (the luckiest of
    many trials), above 1 when the learning-rate search is coarse.

    Example: a single trial per batch size, centred exactly on ``lr*`` with a zero-width window,
    gives ``exp(E[noise * z]) == 1``.
    """
    rng = np.random.default_rng(seed)
    n = design.trials_per_batch
    offset = rng.normal(0.0, design.lr_centre_error, size=(draws, 1)) + rng.uniform(
        -design.lr_window, design.lr_window, size=(draws, n)
    )
    log_ratio = offset * math.log(10.0)
    log_factor = design.lr_sensitivity * log_ratio**2 + design.noise * rng.normal(size=(draws, n))
    usable = (log_ratio <= math.log(design.diverge_above)) & (log_factor <= math.log(design.budget))
    best = np.where(usable, log_factor, np.inf).min(axis=1)
    return float(np.exp(best[np.isfinite(best)].mean()))


# ------------------------------------------------------------------------------------ pieces


def _search(
    truth: StudyTruth, design: StudyDesign, batch: int, s_b: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One batch size's random search: log learning rates, crossings and divergence."""
    n = design.trials_per_batch
    log_best = log_best_lr(truth, design, batch)
    centre = log_best + rng.normal(0.0, design.lr_centre_error) * math.log(10.0)
    log_lr = centre + rng.uniform(-design.lr_window, design.lr_window, size=n) * math.log(10.0)
    log_ratio = log_lr - log_best
    log_factor = design.lr_sensitivity * log_ratio**2 + design.noise * rng.normal(size=n)
    if design.jagged:
        phase = rng.uniform(0.0, 2.0 * math.pi, size=n)
        log_factor += design.jagged * np.sin(2.0 * math.pi * log_lr / math.log(1.05) + phase)
    return log_lr, s_b * np.exp(log_factor), log_ratio > math.log(design.diverge_above)


def _pruned_at(
    first: np.ndarray, diverged: np.ndarray, grid: np.ndarray, slack: float = 1.0
) -> np.ndarray:
    """Per trial, in the order they run: the evaluation step at which pruning stops it (the
    first at or past ``slack`` times the fewest steps an earlier trial reached the target in; it
    goes on while its step is below that), ``inf`` where it runs on (it reaches the target no
    later than that evaluation, or no earlier trial reached it).

    Example: first hits ``[50, inf, 40, 45]`` on the grid ``0, 10, ..., 100`` stop the second
    trial at 50 and the fourth at 40, and let the third win with 40; with ``slack=1.2`` the
    fourth reaches the target too (it would be stopped at 50, the first evaluation at or past
    48).
    """
    stop = np.full(first.size, np.inf)
    best = math.inf
    for k in range(first.size):
        if math.isfinite(best) and not diverged[k]:
            at = grid[min(int(np.searchsorted(grid, slack * best, side="left")), grid.size - 1)]
            if first[k] > at:
                stop[k] = at
                continue
        if not diverged[k]:
            best = min(best, float(first[k]))
    return stop


def log_best_lr(truth: StudyTruth, design: StudyDesign, batch: float) -> float:
    """``log lr*(B)``: ``lr_scale (B / B_0) ** alpha``, bent by ``design.bend`` (see
    `StudyDesign`) around the geometric mean of the batch sizes, which leaves the power law
    closest to it over the design's batch sizes at ``alpha`` for a log-symmetric design."""
    b = np.asarray(design.batch_sizes, dtype=float)
    b0, ref = float(b.min()), float(np.exp(np.mean(np.log(b))))
    bend = design.bend * (math.log(batch / ref) ** 2 - math.log(b0 / ref) ** 2)
    return math.log(truth.lr_scale) + truth.alpha * math.log(batch / b0) + bend


def _seconds_per_step(batch: int) -> float:
    return _SECONDS_PER_STEP * (1.0 + batch / 256.0) / 2.0


QUICKSTART = StudyDesign(
    batch_sizes=(8, 32, 128, 512),
    trials_per_batch=6,
    fine=True,
    noise=0.15,
    jagged=0.15,
    lr_window=0.75,
    lr_centre_error=0.25,
    diverge_above=10.0,
    budget=1.6,
    budget_at_smallest=True,
    pruning=True,
    prune_slack=PRUNE_SLACK,
    b_noise_range=(100.0, 1000.0),
    knee_range=(1.0, 4.0),
)
"""The quickstart's design (`search_spaces/quickstart.yaml`: 4 batch sizes x 6 trials, a budget
tight at batch size 8, pruning at the default slack, B_noise and the knee drawn per study); condition Q of
`benchmarks/answer_coverage.py`."""
