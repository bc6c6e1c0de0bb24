"""Synthetic measurement tables and reports built from them (no TensorFlow, no ledger)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
import pytest
import yaml

from study.config.studyfile import parse_study
from study.config.target import Target
from study.report import ScalingReport, build_report, write_report
from study.report.record import StudyFacts

matplotlib.use("Agg")

S_MIN = 100.0
B_NOISE = 128.0
BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024)
STRATEGIES = (("default", 1, 0.010), ("mirrored:2", 2, 0.006))
"""(name, replicas, seconds per step at batch 8)."""
TARGET = Target.parse("val_accuracy>=0.6")
EVIL = "<script>alert(1)</script>"
"""A study and strategy name that is markup: every format must show it as text."""
STUDY_YAML = """\
name: synthetic
workload: mnist1d
workload_options: {samples: 4000}
model: mlp
target: "val_accuracy>=0.6"
budget: {max_steps: 2000, max_examples: 1000000}
eval_every: "geometric:1.08"
optimizer: nesterov
schedule: constant
seed: 3
trials_per_stratum: 3
search_space:
  batch_size: [8, 16, 32, 64, 128, 256, 512, 1024]
  learning_rate: {low: 1.0e-3, high: 1.0, scale: log}
  strategy: [default, "mirrored:2"]
  momentum: {choices: [0.9]}
tuner: {sampler: tpe, pruning: true}
"""
"""The study file of the synthetic study (3 trials x 8 batch sizes x 2 strategies)."""
PACKAGES = {"study": "0.1.0", "tensorflow": "2.21.0", "keras": "3.15.1", "python": "3.11.7"}
PILOT = {
    "batch_size": 16,
    "strategy": "default",
    "learning_rate": 0.014,
    "seed": 0,
    "steps_run": 600,
    "target": "val_accuracy>=0.6",
    "at_step": 580,
    "b_simple": 150.0,
    "b_simple_low": 110.0,
    "b_simple_high": 210.0,
    "curve": [[200, 60.0, 40.0, 90.0], [580, 150.0, 110.0, 210.0]],
}
"""A pilot run as `study noise-scale` stores it (``ledger.notes.pilot()``, `Pilot.to_stored`)."""
PROBE_FACTS = {
    "repeats": 3,
    "steps": 100,
    "measured_at": "2026-11-30 09:40 UTC",
    "hardware": "2 x Intel Xeon (CPU)",
}
PROBE = [
    {
        "batch_size": b,
        "strategy": name,
        "replicas": replicas,
        "seconds_per_step": seconds * (1 + b / 256) / replicas,
        "seconds_low": 0.9 * seconds * (1 + b / 256) / replicas,
        "seconds_high": 1.2 * seconds * (1 + b / 256) / replicas,
        **PROBE_FACTS,
    }
    for b in (8, 32, 128, 512, 2048)
    for name, replicas, seconds in STRATEGIES
]
"""A throughput probe as `study probe` stores it (``ledger.notes.throughput()``,
`ThroughputRow.to_stored`): the synthetic study's seconds per step, and batch size 2048, which
the study did not measure."""


def best_lr(batch_size: float) -> float:
    """The best learning rate of the synthetic workload: ``0.01 * (B / 8) ** 0.5``."""
    return 0.01 * (batch_size / 8) ** 0.5


def synthetic_table(
    *,
    s_min: float = S_MIN,
    b_noise: float = B_NOISE,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    lr_factors: Sequence[float] = (1 / 3, 1.0, 3.0),
    strategies: Sequence[tuple[str, int, float]] = STRATEGIES,
    noise: float = 0.05,
    seed: int = 0,
    study: str = "synthetic",
    ratio: float = 1.08,
) -> pd.DataFrame:
    """Trials whose steps to ``val_accuracy >= 0.6`` follow ``S(B) = s_min (1 + b_noise / B)``.

    Every batch size tries the learning rates ``best_lr(B) * f`` for ``f`` in ``lr_factors``; a
    trial at ``lr`` needs ``S(B) * (1 + log(lr / best_lr(B))**2) * lognormal(0, noise)`` steps,
    its accuracy rising linearly to 0.6 at that step and to 0.8 at twice it (evaluated on a
    geometric grid of ``ratio``). Each strategy runs every trial again, with its own seconds
    per step ``seconds * (1 + B / 256) / replicas``.
    """
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    trial = 0
    for name, replicas, seconds in strategies:
        for b in batch_sizes:
            for factor in lr_factors:
                lr = best_lr(b) * factor
                penalty = 1.0 + np.log(factor) ** 2
                needed = s_min * (1.0 + b_noise / b) * penalty * rng.lognormal(0.0, noise)
                per_step = seconds * (1 + b / 256) / replicas
                for step in _grid(int(np.ceil(2 * needed)), ratio):
                    acc = min(0.8, 0.1 + 0.5 * step / needed)
                    rows.append(
                        {
                            "study": study,
                            "trial": trial,
                            "batch_size": b,
                            "strategy": name,
                            "replicas": replicas,
                            "tuner": "optuna",
                            "state": "reached",
                            "learning_rate": lr,
                            "hp.momentum": 0.9,
                            "step": step,
                            "examples": step * b,
                            "train_seconds": step * per_step,
                            "train_loss": 2.0 * (1.0 - acc),
                            "val_accuracy": acc,
                            "val_loss": 2.2 * (1.0 - acc),
                        }
                    )
                trial += 1
    return pd.DataFrame(rows)


def _grid(last: int, ratio: float) -> list[int]:
    steps, step = [0], 0
    while step < last:
        step = min(last, max(step + 1, int(np.ceil(step * ratio))))
        steps.append(step)
    return steps


@pytest.fixture(scope="session")
def make_table() -> Callable[..., pd.DataFrame]:
    return synthetic_table


@pytest.fixture(scope="session")
def table() -> pd.DataFrame:
    return synthetic_table()


def build(df: pd.DataFrame, target: Target = TARGET, **kwargs: Any) -> ScalingReport:
    """`build_report` with the tests' defaults: study "synthetic"."""
    options = {"study": "synthetic", "accelerators": None, **kwargs}
    return build_report(df, target, **options)


@pytest.fixture(scope="session")
def make_report() -> Callable[..., ScalingReport]:
    return build


@pytest.fixture(scope="session")
def report(table: pd.DataFrame) -> ScalingReport:
    """A healthy study: eight batch sizes, two strategies, every trial reached the target."""
    return build(table)


def study_facts(**changes: Any) -> StudyFacts:
    """The facts of the synthetic study, read from `STUDY_YAML` as `study report` does."""
    config = parse_study(yaml.safe_load(STUDY_YAML), "synthetic.yaml", text=STUDY_YAML)
    options = {
        "config": config,
        "study_file": "search_spaces/synthetic.yaml",
        "tuner": "optuna",
        "trials_planned": 48,
        "packages": PACKAGES,
        "trained_with": {"tensorflow": "2.21.0", "keras": "3.15.1"},
        **changes,
    }
    return StudyFacts(**options)


@pytest.fixture(scope="session")
def facts_report(table: pd.DataFrame) -> ScalingReport:
    """The healthy study with the facts of its study file, its pilot run and its throughput
    probe, as `study report` makes it."""
    return build(table, facts=study_facts(), pilot=PILOT, probe=PROBE)


@pytest.fixture(scope="session")
def evil_report() -> ScalingReport:
    """A healthy study whose study and strategy names are markup."""
    df = synthetic_table(
        strategies=(("default", 1, 0.01), (f"{EVIL}:2", 2, 0.006)), study=EVIL, ratio=1.15
    )
    return build(df, study=EVIL)


@pytest.fixture(scope="session")
def written(evil_report: ScalingReport, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`evil_report` written in every format: ``{"out": directory, "paths": files}``."""
    out = tmp_path_factory.mktemp("report")
    return {"out": out, "paths": write_report(evil_report, out)}
