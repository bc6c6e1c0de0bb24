"""`study.run` and `study.train`: arguments checked first and named, then the real thing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import study
from study.api import study_config

TINY_STUDY = {
    "name": "api-tiny",
    "workload": "tabular",
    "workload_options": {"rows": 2000},
    "target": "val_accuracy>=0.7",
    "budget": {"max_steps": 60},
    "eval_every": 10,
    "trials_per_stratum": 1,
    "search_space": {
        "batch_size": [32, 128],
        "learning_rate": {"low": 0.05, "high": 0.2, "scale": "log"},
    },
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"workers": 0}, r"^workers must be an integer >= 1 \(got 0\)$"),
        ({"workers": 1.5}, r"^workers must be an integer >= 1 \(got 1.5\)$"),
        (
            {"tuner": "grid"},
            r"^tuner must be one of 'optuna', 'keras-tuner', 'both' \(got 'grid'\)",
        ),
        ({"trials": 0}, r"^trials must be an integer >= 1 \(got 0\)$"),
        ({"storage": 3}, r"^storage must be a string or a path \(got 3\)$"),
    ],
)
def test_run_names_a_bad_argument_before_anything_is_recorded(here, arguments, message) -> None:
    with pytest.raises(study.UsageError, match=message):
        study.run(TINY_STUDY, **arguments)
    assert list(here.iterdir()) == []


def test_run_names_a_bad_study_by_where_it_came_from(here) -> None:
    with pytest.raises(study.UsageError, match=r"^path_or_config must be a study file's path"):
        study.run(42)  # type: ignore[arg-type]
    with pytest.raises(study.UsageError, match=r"study file 'missing.yaml' not found"):
        study.run("missing.yaml")
    with pytest.raises(study.UsageError, match=r"^<study mapping>: workload_options.rows"):
        study.run({**TINY_STUDY, "workload_options": {"rows": -5}})
    assert list(here.iterdir()) == []


def test_a_study_file_a_mapping_and_a_config_are_the_same_study(here) -> None:
    import yaml

    path = here / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_STUDY))
    from_file, from_mapping = study_config(path), study_config(TINY_STUDY)
    assert study_config(from_file) is from_file
    assert from_file.space == from_mapping.space and from_file.target == from_mapping.target
    assert str(from_file.source) == str(path)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"learning_rate": -1.0}, r"^learning_rate must be > 0 \(got -1.0\)"),
        ({"batch_size": 0}, r"^batch_size must be"),
        ({"max_steps": 0}, r"^max_steps must be"),
        ({"eval_every": "often"}, r"^eval_every"),
        ({"target": "accuracy"}, r"^target: cannot parse 'accuracy'"),
        ({"workload_options": {"rows": -5}}, r"^workload_options\['rows'\] must be"),
        ({"workload_options": [1]}, r"^workload_options must be a mapping"),
        ({"noise_every": 4}, r"^noise_every 4 needs noise_scale \(it sets how often"),
        ({"noise_scale": True, "noise_every": 0}, r"^noise_every must be >= 1 \(got 0\)$"),
        ({"lr_alpha": 1.0}, r"^lr_alpha needs batch_schedule \(it scales its learning rate\)$"),
        ({"batch_schedule": "32,16"}, r"^batch_schedule.stages"),
        ({"target_hold": "often"}, r"^target_hold: cannot parse 'often'"),
        ({"lerning_rate": 0.1}, r"^lerning_rate: not a field of a trial \(did you mean"),
    ],
)
def test_train_names_a_bad_argument(here, arguments, message) -> None:
    with pytest.raises(study.UsageError, match=message):
        study.train(**{"workload": "tabular", **arguments})
    assert list(here.iterdir()) == []


def test_train_names_an_empty_workload(here) -> None:
    with pytest.raises(study.UsageError, match=r"^workload must be a non-empty string"):
        study.train("")


def test_train_takes_a_whole_definition_and_changes_to_it(here) -> None:
    trial = study.TrialDefinition("tabular", learning_rate=-1.0)
    with pytest.raises(study.UsageError, match=r"^learning_rate must be > 0 \(got -1.0\)"):
        study.train(trial)
    with pytest.raises(study.UsageError, match=r"^batch_size must be >= 1 \(got 0\)"):
        study.train(trial, learning_rate=0.1, batch_size=0)
    with pytest.raises(study.UsageError, match=r"^trial must be a workload's name or a "):
        study.train(42)  # type: ignore[arg-type]
    assert list(here.iterdir()) == []


def test_train_runs_one_trial_in_a_worker(here) -> None:
    result = study.train(
        "tabular",
        batch_size=64,
        learning_rate=0.1,
        workload_options={"rows": 2000},
        target="val_accuracy>=0.99",
        max_steps=30,
        eval_every=10,
        track=False,
    )
    assert isinstance(result, study.TrialResult)
    assert result.state is study.TrialState.NOT_REACHED and result.steps_run == 30
    curve = result.frame()
    assert {0, 10, 20, 30} <= set(curve["step"]) and "val_accuracy" in curve
    assert "curve=" not in repr(result) and "state=<TrialState.NOT_REACHED" in repr(result)
    assert list(here.iterdir()) == []  # untracked: no mlruns/


def test_run_runs_a_study_and_returns_it(here) -> None:
    ran = study.run(TINY_STUDY, tuner="optuna")
    assert isinstance(ran, study.Study) and ran.name == "api-tiny"
    assert ran.state == "complete"
    trials = ran.trials()
    assert sorted(trials["batch_size"]) == [32, 128]
    assert trials["steps_run"].gt(0).all()
    runs = ran.runs()  # every trial in MLflow, under the parent
    assert len(runs) == 3 and (runs["tags.study.role"] == "trial").sum() == 2
    assert math.isfinite(float(trials["wall_seconds"].sum()))
