"""Builders of synthetic measurement tables for the analysis tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")


def trial_rows(
    *,
    batch_size: int,
    trial: int,
    learning_rate: float,
    steps: Sequence[int],
    accuracy: Sequence[float],
    state: str = "reached",
    strategy: str = "default",
    replicas: int = 1,
    seconds_per_step: float = 0.01,
    study: str = "synthetic",
    momentum: float = 0.9,
) -> list[dict[str, Any]]:
    """The rows of one trial: one per evaluation step, ``val_accuracy`` given per step."""
    return [
        {
            "study": study,
            "trial": trial,
            "batch_size": batch_size,
            "strategy": strategy,
            "replicas": replicas,
            "tuner": "grid",
            "state": state,
            "learning_rate": learning_rate,
            "hp.momentum": momentum,
            "step": step,
            "examples": step * batch_size,
            "train_seconds": step * seconds_per_step,
            "train_loss": 2.0 * (1.0 - acc) if np.isfinite(acc) else np.nan,
            "val_accuracy": acc,
            "val_loss": 2.2 * (1.0 - acc) if np.isfinite(acc) else np.nan,
            "val/classification_error": 1.0 - acc,
        }
        for step, acc in zip(steps, accuracy)
    ]


def build_table(trials: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """A measurement table from keyword dicts of `trial_rows`."""
    return pd.DataFrame([row for spec in trials for row in trial_rows(**spec)])


def geometric_steps(last: int, ratio: float = 1.02) -> list[int]:
    """Evaluation steps 0, 1, 2, ... each at least ``ratio`` times the previous, up to ``last``."""
    steps, step = [0], 0
    while step < last:
        step = min(last, max(step + 1, int(np.ceil(step * ratio))))
        steps.append(step)
    return steps


def scaling_table(
    *,
    s_min: float = 200.0,
    b_noise: float = 256.0,
    batch_sizes: Sequence[int] = tuple(2**k for k in range(3, 13)),
    learning_rates: Sequence[float] = (0.01, 0.03, 0.1, 0.3, 1.0),
    noise: float = 0.1,
    seed: int = 0,
    strategies: Sequence[tuple[str, int, float]] = (("default", 1, 0.01),),
    best_lr: Callable[[float], float] = lambda b: 0.01 * (b / 8) ** 0.5,
) -> pd.DataFrame:
    """Trials whose steps to ``val_accuracy >= 0.6`` follow ``S(B) = s_min (1 + b_noise / B)``.

    Each trial needs ``S(B) * (1 + log(lr / best_lr(B))**2) * lognormal(0, noise)`` steps; its
    accuracy rises linearly to 0.6 at that step and reaches 0.8 at twice that step (evaluated on a
    fine geometric grid). ``strategies`` are (name, replicas, seconds per step at batch 8).
    """
    rng = np.random.default_rng(seed)
    specs, trial = [], 0
    for name, replicas, seconds in strategies:
        for b in batch_sizes:
            for lr in learning_rates:
                penalty = 1.0 + np.log(lr / best_lr(b)) ** 2
                needed = s_min * (1.0 + b_noise / b) * penalty * rng.lognormal(0.0, noise)
                steps = geometric_steps(int(np.ceil(2 * needed)))
                accuracy = [min(0.8, 0.6 * s / needed) for s in steps]
                specs.append(
                    {
                        "batch_size": b,
                        "trial": trial,
                        "learning_rate": lr,
                        "steps": steps,
                        "accuracy": accuracy,
                        "strategy": name,
                        "replicas": replicas,
                        "seconds_per_step": seconds * (1 + b / 512) / replicas,
                    }
                )
                trial += 1
    return build_table(specs)


def trial_steps(
    *,
    s_min: float = 200.0,
    b_noise: float = 256.0,
    batch_sizes: Sequence[int] = tuple(2**k for k in range(3, 13)),
    trials_per_batch: int = 5,
    noise: float = 0.1,
    seed: int = 0,
) -> pd.DataFrame:
    """Per-trial steps to target drawn from ``S(B) * lognormal(0, noise)`` (no curves)."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "batch_size": b,
            "trial": i,
            "steps_to_target": s_min * (1.0 + b_noise / b) * rng.lognormal(0.0, noise),
        }
        for b in batch_sizes
        for i in range(trials_per_batch)
    ]
    return pd.DataFrame(rows)


def steps_table(
    batch_sizes: Sequence[float], steps: Sequence[float], **columns: Any
) -> pd.DataFrame:
    """A per-batch-size table as `summarize_trials` gives, with only the columns asked for.

    Example: ``steps_table([8, 16], [100, 50], best_learning_rate=[0.01, 0.014])``.
    """
    df = pd.DataFrame({"batch_size": batch_sizes, "steps_to_result": np.asarray(steps, float)})
    for name, values in columns.items():
        df[name] = values
    return df


@pytest.fixture(scope="session")
def make_table() -> Callable[..., pd.DataFrame]:
    return build_table


@pytest.fixture(scope="session")
def make_scaling_table() -> Callable[..., pd.DataFrame]:
    return scaling_table


@pytest.fixture(scope="session")
def make_trial_steps() -> Callable[..., pd.DataFrame]:
    return trial_steps


@pytest.fixture(scope="session")
def make_steps() -> Callable[..., pd.DataFrame]:
    return steps_table
