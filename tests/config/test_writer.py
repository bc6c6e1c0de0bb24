"""Tests for study.config.writer: a study file written from a trial or a study, checked first."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from study.config.studyfile import load_study_file, parse_study
from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSettings, TrialSpec
from study.config.writer import DEFAULT_TRIALS, study_mapping, study_text, write_study
from study.errors import UsageError
from tests.config.test_studyfile import BASE

SPEC = TrialSpec(
    workload="tabular",
    workload_options={"rows": 2000},
    model="mlp",
    batch_size=8,
    optimizer=OptimizerSpec(name="adam", learning_rate=0.01),
    target=Target.parse("val_accuracy>=0.8"),
    strategy="default",
    settings=TrialSettings(
        budget=Budget(max_steps=300),
        cadence=EvalCadence(kind="fixed", every=10),
        seed=4,
        precision="float32",
        noise_scale=True,  # the pilot's measurement is not the study's
        noise_every=2,
    ),
)
GRID = {"batch_sizes": [8, 16, 32], "learning_rate": (0.01, 0.3), "strategies": ["default"]}


def test_a_study_from_a_trial_keeps_its_workload_and_settings() -> None:
    data = study_mapping(None, SPEC, **GRID)
    assert list(data) == [
        "name", "workload", "workload_options", "model", "target", "budget", "eval_every",
        "optimizer", "schedule", "seed", "precision", "jit_compile", "trials_per_stratum",
        "search_space",
    ]  # fmt: skip
    assert data["name"] == "tabular-mlp-suggested"
    assert (data["budget"], data["eval_every"], data["seed"]) == ({"max_steps": 300}, 10, 4)
    assert data["trials_per_stratum"] == DEFAULT_TRIALS
    assert data["search_space"] == {
        "batch_size": [8, 16, 32],
        "learning_rate": {"low": 0.01, "high": 0.3, "scale": "log"},
        "strategy": ["default"],
    }
    config = parse_study(yaml.safe_load(study_text(data)), "w.yaml")
    assert config.settings == TrialSettings(
        budget=Budget(max_steps=300),
        cadence=EvalCadence(kind="fixed", every=10),
        seed=4,
        precision="float32",
    )
    assert (config.optimizer, str(config.target)) == ("adam", "val_accuracy>=0.8")


def test_a_study_from_a_study_file_keeps_the_file_but_the_grid() -> None:
    base = parse_study(BASE, "x.yaml")
    data = study_mapping(base, SPEC, **GRID, name="next")
    assert data["name"] == "next"
    assert {k: v for k, v in data.items() if k not in ("name", "search_space")} == {
        k: v for k, v in BASE.items() if k not in ("name", "search_space")
    }
    assert list(data["search_space"]) == ["batch_size", "learning_rate", "strategy"]
    assert data["search_space"]["batch_size"] == [8, 16, 32]
    assert study_mapping(base, SPEC, **GRID)["name"] == "x-suggested"


def test_write_checks_then_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    config = write_study(study_mapping(None, SPEC, **GRID), path)
    assert load_study_file(path).settings == config.settings
    bad = study_mapping(None, SPEC, **{**GRID, "batch_sizes": [0]})
    with pytest.raises(UsageError, match=r"search_space\.batch_size"):
        write_study(bad, tmp_path / "bad.yaml")
    assert not (tmp_path / "bad.yaml").exists()
