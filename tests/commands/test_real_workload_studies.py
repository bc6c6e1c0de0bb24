"""Small studies from the CLI on what users bring: a folder of images in class folders, and
their own compiled Keras model (`examples/own_model`), run, tracked and summarised."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from tests.inprocess import study_here

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def reached_strata(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, cwd: Path
) -> list[dict[str, Any]]:
    status = study_here(monkeypatch, capsys, "status", name, "--json", cwd=cwd)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["trials_done"] == data["trials_total"], data
    return [s for s in data["strata"] if s["best_steps"] is not None]


def test_image_folder_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    for name, colour in {"red": (200, 40, 40), "green": (40, 200, 40)}.items():
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i in range(40):
            noise = rng.integers(-80, 80, size=(8, 8, 3))
            pixels = np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / "photos" / name / f"{i}.png")
    spec = {
        "name": "photos",
        "workload": "images",
        "workload_options": {"path": "photos", "image_size": 8},
        "model": "cnn",
        "target": "val_accuracy>=0.9",
        "budget": {"max_steps": 300},
        "eval_every": 5,
        "trials_per_stratum": 2,
        "search_space": {
            "batch_size": [8, 32],
            "learning_rate": {"low": 1.0e-2, "high": 0.3, "scale": "log"},
        },
    }
    (tmp_path / "photos.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    run = study_here(monkeypatch, capsys, "run", "photos.yaml", "--tuner", "optuna", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(reached_strata(monkeypatch, capsys, "photos", tmp_path)) == 2


def test_own_model_study_from_the_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = yaml.safe_load((ROOT / "examples" / "own_model" / "study.yaml").read_text())
    spec["search_space"]["batch_size"] = [64]
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    run = study_here(
        monkeypatch,
        capsys,
        "run",
        "own.yaml",
        "--tuner",
        "both",
        cwd=tmp_path,
        pythonpath=ROOT / "examples" / "own_model",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(reached_strata(monkeypatch, capsys, spec["name"], tmp_path)) == 1
