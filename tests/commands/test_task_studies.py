"""Studies on other tasks than multi-class: a regression CSV to ``val_mse<=...`` and a binary
CSV to ``val_auc>=...``, run, tracked and reported from the CLI like any other study."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.inprocess import study_here

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


def task_study(name: str, csv: str, label: str, task: str, target: str) -> dict[str, Any]:
    return {
        "name": name,
        "workload": "csv",
        "workload_options": {"path": str(DATA / csv), "label": label, "task": task},
        "target": target,
        "budget": {"max_steps": 600},
        "eval_every": "geometric:1.1",
        "trials_per_stratum": 2,
        "search_space": {
            "batch_size": [16, 64],
            "learning_rate": {"low": 3.0e-3, "high": 0.3, "scale": "log"},
            "strategy": ["default"],
        },
    }


@pytest.mark.parametrize(
    ("name", "csv", "label", "task", "target"),
    [
        # 0.05 is a level a noisy batch-16 trial crosses 31 times without holding
        ("houses", "houses.csv", "price_k", "regression", "val_mse<=0.06"),
        ("churn", "churn.csv", "churned", "binary", "val_auc>=0.95"),
    ],
)
def test_a_study_on_another_task_reaches_its_own_target_and_reports(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    csv: str,
    label: str,
    task: str,
    target: str,
) -> None:
    file = tmp_path / f"{name}.yaml"
    file.write_text(yaml.safe_dump(task_study(name, csv, label, task, target)), encoding="utf-8")

    run = study_here(monkeypatch, capsys, "run", str(file), "--tuner", "optuna", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    status = json.loads(
        study_here(monkeypatch, capsys, "status", name, "--json", cwd=tmp_path).stdout
    )
    reached = [s for s in status["strata"] if s["best_steps"] is not None]
    assert len(reached) == 2, status

    report = study_here(
        monkeypatch,
        capsys,
        "report",
        name,
        "--format",
        "json",
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    data = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert data["target"]["text"] == target
    text = json.dumps(data)
    assert ("val_mse" if task == "regression" else "val_auc") in text
