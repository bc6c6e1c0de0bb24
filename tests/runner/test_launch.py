"""Tests for study.runner.launch: a study's fingerprint, the identity ``study resume`` compares.

The fingerprints are pinned: a study stored by earlier code must resume with the same file,
whatever the data model (`TrialSettings`, ...) looks like inside.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from study.config.studyfile import parse_study
from study.runner.launch import fingerprint

ROOT = Path(__file__).resolve().parents[2]

#: Every setting written out, none at its default.
EVERY_SETTING = """\
name: every-setting
workload: tabular
workload_options: {rows: 2000}
model: mlp
target: "val_accuracy>=0.8"
budget: {max_steps: 200, max_examples: null, max_seconds: 60}
eval_every: 10
optimizer: adam
schedule: cosine
seed: 3
loss: sparse_categorical_crossentropy
precision: float32
jit_compile: "off"
noise_scale: true
noise_every: 4
exact_steps: false
trials_per_stratum: 2
search_space:
  batch_size: [32, 64]
  learning_rate: {low: 1.0e-3, high: 1.0e-1}
"""


def fingerprint_of(text: str) -> str:
    return fingerprint(parse_study(yaml.safe_load(text), "s.yaml", text=text))


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("search_spaces/csv_example.yaml", "88a41ae0f2b756ac"),
        ("search_spaces/mnist1d_cnn.yaml", "83b915cc4f4dd0d2"),
        ("search_spaces/mnist1d_mlp.yaml", "7b72b5ebff872918"),
        ("search_spaces/quickstart.yaml", "bb5c9a8713ef1a14"),
        ("search_spaces/shapes_resnet.yaml", "2035004820e3f36a"),
        ("search_spaces/tabular_strategies.yaml", "a38f0d775c22540d"),
        ("examples/own_model/study.yaml", "6ca118c156aff941"),
    ],
)
def test_shipped_study_files_keep_their_fingerprint(path: str, expected: str) -> None:
    assert fingerprint_of((ROOT / path).read_text(encoding="utf-8")) == expected


def test_every_setting_keeps_its_fingerprint() -> None:
    assert fingerprint_of(EVERY_SETTING) == "ec6af8843af5f96b"


def test_a_later_setting_at_its_default_is_the_same_study() -> None:
    left_out = "\n".join(
        line
        for line in EVERY_SETTING.splitlines()
        if not line.startswith(("noise_scale", "noise_every", "exact_steps"))
    )
    written = left_out + "\nnoise_scale: false\nnoise_every: 16\nexact_steps: true\n"
    assert fingerprint_of(written) == fingerprint_of(left_out) != fingerprint_of(EVERY_SETTING)


def test_each_setting_is_part_of_the_identity() -> None:
    changed = [
        EVERY_SETTING.replace("seed: 3", "seed: 4"),
        EVERY_SETTING.replace("eval_every: 10", "eval_every: 20"),
        EVERY_SETTING.replace("max_steps: 200", "max_steps: 300"),
        EVERY_SETTING.replace("precision: float32", "precision: mixed_float16"),
        EVERY_SETTING.replace('jit_compile: "off"', 'jit_compile: "on"'),
        EVERY_SETTING.replace("loss: sparse_categorical_crossentropy", "loss: null"),
        EVERY_SETTING.replace("noise_every: 4", "noise_every: 8"),
        EVERY_SETTING.replace("exact_steps: false", "exact_steps: true"),
    ]
    prints = {fingerprint_of(text) for text in changed}
    assert len(prints) == len(changed) and fingerprint_of(EVERY_SETTING) not in prints


def test_a_budget_the_model_cannot_answer_from_is_warned_of() -> None:
    from study.config.studyfile import load_study_file
    from study.runner.launch import thin_budget_warning

    config = load_study_file("search_spaces/quickstart.yaml")  # 4 batch sizes x 6 trials
    assert thin_budget_warning(config, config.total_trials) == ""
    warning = thin_budget_warning(config, 12)
    assert warning.startswith("study quickstart: warning: the model of every trial will have")
    assert "12 trials planned, it needs at least 13" in warning
    assert "trials_per_stratum" in warning and "search_spaces/quickstart.yaml" in warning
