"""Synthetic studies whose answers follow a known law in the target, for judging the
extrapolation of `study.analysis.target_prediction`.

Every trial is a whole validation curve. At an error level ``e`` (``1 - val_accuracy``) the
steps a batch size needs follow McCandlish et al.'s ``S_e(B) = s_min(e) (1 + B_noise(e) / B)``
with power laws in the error (Kaplan et al. 2020)::

    B_noise(e) = b_noise * (e / e_target) ** -p        s_min(e) = s_min * (e / e_target) ** -p_s

(``e_target``: the study's target's error), so both grow as the target gets harder and every
curve falls monotonically. A trial at learning rate ``lr`` crosses level ``e`` after
``S_e(B) * exp(lr_sensitivity * ln(lr / lr*(B)) ** 2 + noise * z)`` steps, one ``z`` per trial
(a trial good at one level is good at all), ``lr*(B) = lr_scale (B / B_0) ** alpha`` as in
`sim.simulate`; it diverges above ``diverge_above * lr*(B)``. Its accuracy rises linearly from
``START`` at step 0 to the first level drawn (``e = 1 - START - 0.05``), then follows the
inverse of its crossings, evaluated on the study's geometric grid; a trial stops at its first
evaluation at or past the study's target (as the study runner stops it) or at its budget
(``budget * S_target(B)``). A harder target the study never reached is where the law is
checked: the truth there is ``B_noise(e)`` and, at the knee ``q = 1`` of this S(B), the
critical batch size ``overhead * B_noise(e)``.

Example::

    truth = draw_level_truth(LEVEL_DESIGN, rng)
    table = simulate_level_table(truth, LEVEL_DESIGN, rng)
    truth.b_noise_at(0.3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.simulate import StudyDesign, evaluation_steps
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

TARGET = "val_accuracy>=0.6"
"""The study's own target."""

E_TARGET = 0.4
"""Its error."""

START = 0.1
"""Every trial's accuracy at step 0 (chance on ten classes)."""


@dataclass(frozen=True)
class LevelTruth:
    """The generating values: B_noise and S_min at the study's target, their exponents in the
    error (``p``, ``p_s``), the best rate's ``alpha`` and ``lr_scale``."""

    b_noise: float
    s_min: float
    p: float
    p_s: float
    alpha: float
    lr_scale: float

    def b_noise_at(self, error: float | np.ndarray) -> np.ndarray:
        return self.b_noise * (np.asarray(error, dtype=float) / E_TARGET) ** -self.p

    def s_min_at(self, error: float | np.ndarray) -> np.ndarray:
        return self.s_min * (np.asarray(error, dtype=float) / E_TARGET) ** -self.p_s

    def steps(self, error: float | np.ndarray, batch: float) -> np.ndarray:
        """``S_e(B)`` at each error level."""
        return self.s_min_at(error) * (1.0 + self.b_noise_at(error) / batch)


LEVEL_DESIGN = StudyDesign(
    batch_sizes=(16, 32, 64, 128, 256, 512, 1024),
    trials_per_batch=6,
    noise=0.1,
    lr_window=0.5,
    lr_centre_error=0.15,
    budget=4.0,
)
"""The simulated studies' design: the MNIST-1D MLP question's size (7 batch sizes x 6 trials,
`benchmarks/mnist1d_compute.yaml`), trial noise 0.1 in log steps."""


def draw_level_truth(design: StudyDesign, rng: np.random.Generator) -> LevelTruth:
    """B_noise at the target log-uniform between the second smallest and the third largest
    batch size (the harder target's stays within reach of the design); ``p`` uniform on
    [0.5, 2], ``p_s`` on [0.5, 1.5]; ``s_min`` log-uniform on [50, 500] steps; ``alpha`` on
    [0.3, 1]; ``lr_scale`` log-uniform on [0.001, 0.01]."""
    b = np.sort(np.asarray(design.batch_sizes, dtype=float))
    b_noise = float(np.exp(rng.uniform(math.log(b[1]), math.log(b[-3]))))
    return LevelTruth(
        b_noise=b_noise,
        s_min=float(np.exp(rng.uniform(math.log(50.0), math.log(500.0)))),
        p=float(rng.uniform(0.5, 2.0)),
        p_s=float(rng.uniform(0.5, 1.5)),
        alpha=float(rng.uniform(0.3, 1.0)),
        lr_scale=float(10.0 ** rng.uniform(-3.0, -2.0)),
    )


def simulate_level_table(
    truth: LevelTruth, design: StudyDesign, rng: np.random.Generator, stop: float = E_TARGET
) -> pd.DataFrame:
    """The study's measurement table (see the module): one row per evaluation; its trials
    stop at the error ``stop`` (default the study's target; a smaller one: a study run to a
    harder target, with the budget ``budget * S_stop(B)``)."""
    errors = np.linspace(1.0 - START - 0.05, 0.02, 200)  # easiest first
    b0 = min(design.batch_sizes)
    frames, trial = [], 0
    for b in design.batch_sizes:
        log_best = math.log(truth.lr_scale) + truth.alpha * math.log(b / b0)
        centre = log_best + rng.normal(0.0, design.lr_centre_error) * math.log(10.0)
        n = design.trials_per_batch
        log_lr = centre + rng.uniform(-design.lr_window, design.lr_window, n) * math.log(10.0)
        ratio = log_lr - log_best
        factor = np.exp(design.lr_sensitivity * ratio**2 + design.noise * rng.normal(size=n))
        budget = max(1, math.ceil(design.budget * float(truth.steps(stop, b))))
        grid = evaluation_steps(budget, design.eval_ratio)
        curve = truth.steps(errors, b)
        for k in range(n):
            crossings = curve * factor[k]
            accuracy = _accuracy(grid, crossings, errors)
            diverged = ratio[k] > math.log(design.diverge_above)
            hit = np.nonzero(accuracy >= 1.0 - stop)[0]
            if diverged:
                steps, accuracy, state = grid[:4], np.r_[accuracy[:1], [math.nan] * 3], "diverged"
                accuracy = accuracy[: steps.size]
            elif hit.size:
                steps, accuracy, state = grid[: hit[0] + 1], accuracy[: hit[0] + 1], "reached"
            else:
                steps, state = grid, "not_reached"
            frames.append(_rows(trial, b, float(np.exp(log_lr[k])), state, steps, accuracy))
            trial += 1
    return pd.concat(frames, ignore_index=True)


def _accuracy(grid: np.ndarray, crossings: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """A trial's accuracy at each evaluation step: linear from `START` to the first level's
    crossing, then the level crossed last (interpolated in log steps)."""
    first = crossings[0]
    out = np.empty(grid.size)
    early = grid < first
    out[early] = START + (1.0 - errors[0] - START) * grid[early] / first
    later = ~early
    out[later] = 1.0 - np.interp(np.log(grid[later]), np.log(crossings), errors)
    return out


def _rows(
    trial: int, batch: int, lr: float, state: str, steps: np.ndarray, accuracy: np.ndarray
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            STUDY: "levels",
            TRIAL: trial,
            BATCH_SIZE: batch,
            STRATEGY: "default",
            REPLICAS: 1,
            TUNER: "random",
            STATE: state,
            LEARNING_RATE: lr,
            STEP: steps.astype(int),
            EXAMPLES: steps.astype(int) * batch,
            TRAIN_SECONDS: steps * 1e-3,
            TRAIN_LOSS: 2.0 * (1.0 - accuracy),
            "val_accuracy": accuracy,
            "val_loss": 2.2 * (1.0 - accuracy),
        }
    )
