"""Tests for study.tracking.mlflow_logger, on both kinds of store a study uses: a temporary
SQLite store and a real tracking server through its REST API (`mlflow_server`).

Results are built by hand (no TensorFlow), a description of their data among them. Creating an MLflow SQLite store runs its migrations
(several seconds), so one store of each kind serves the module; every test uses its own runs,
and experiment names carry a random suffix (a CI server outlives the session).
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from study.config.target import Target
from study.config.trial import Budget, EvalCadence, OptimizerSpec, TrialSettings, TrialSpec
from study.ledger.records import TimingSummary
from study.paths import artifact_root, tracking_uri
from study.results import Measurement, TrialResult, TrialState
from study.tracking.mlflow_logger import (
    RUN_STATUS,
    MlflowLogger,
    curve_metrics,
    study_timing_metrics,
    timing_metrics,
)
from tests.tracking.test_dataset_input import GENERATED as DATA

SPEC = TrialSpec(
    workload="tabular",
    workload_options={"rows": 2000},
    batch_size=64,
    optimizer=OptimizerSpec(name="adam", learning_rate=0.003),
    target=Target.parse("val_accuracy>=0.9"),
    strategy="mirrored:2",
    settings=TrialSettings(
        budget=Budget(max_steps=500), cadence=EvalCadence(kind="fixed", every=10), seed=3
    ),
)
ENVIRONMENT = {
    "strategy": "mirrored",
    "strategy_requested": "mirrored:2",
    "replicas": 2,
    "per_replica_batch": 32,
    "devices": "/cpu:0,/cpu:1",
}


def measurement(step: int, train_loss: float, accuracy: float) -> Measurement:
    return Measurement(
        step=step,
        examples=step * 64,
        train_seconds=step * 0.025,
        train_loss=train_loss,
        metrics={"val_loss": 1.0 - accuracy, "val_accuracy": accuracy, "val_error": 1 - accuracy},
    )


REACHED = TrialResult(
    state=TrialState.REACHED,
    steps_run=20,
    examples_run=1280,
    train_seconds=0.5,
    steps_to_target=20,
    examples_to_target=1280,
    seconds_to_target=0.5,
    curve=(
        measurement(0, math.nan, 0.5),
        measurement(10, 0.6, 0.75),
        measurement(20, 0.3, 0.925),
    ),
    environment=ENVIRONMENT,
)


SUFFIX = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def sqlite_logger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowLogger]:
    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    yield MlflowLogger(f"sqlite:///{path}")


@pytest.fixture(scope="module", params=["sqlite", "server"])
def logger(request: pytest.FixtureRequest) -> MlflowLogger:
    """A logger on the SQLite store, then on the tracking server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_logger")
    return MlflowLogger(request.getfixturevalue("mlflow_server"))


@pytest.fixture(scope="module")
def experiment(logger: MlflowLogger) -> str:
    return logger.experiment_id(f"logger-tests-{SUFFIX}")


@pytest.fixture
def client(logger: MlflowLogger) -> MlflowClient:
    return MlflowClient(tracking_uri=logger.uri)


def log(logger: MlflowLogger, experiment: str, result: TrialResult, **kwargs) -> str:
    run_id = logger.start_run(experiment, "trial")
    logger.log_trial(run_id, SPEC, result, **kwargs)
    return run_id


def history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


# log_trial


def test_log_trial_writes_every_param(logger, experiment, client) -> None:
    run = client.get_run(log(logger, experiment, REACHED))
    params = run.data.params

    assert set(SPEC.to_params()) <= set(params)
    expected = {
        "workload": "tabular",
        "workload.rows": "2000",
        "model": "default",
        "batch_size": "64",
        "per_replica_batch": "32",
        "strategy": "mirrored:2",
        "strategy_resolved": "mirrored",
        "replicas": "2",
        "optimizer": "adam",
        "optimizer.learning_rate": "0.003",
        "optimizer.beta2": "0.999",
        "schedule": "constant",
        "target": "val_accuracy>=0.9",
        "budget.max_steps": "500",
        "eval_cadence": "10",
        "seed": "3",
    }
    assert {k: params.get(k) for k in expected} == expected
    assert "budget.max_examples" not in params  # None values are left out


def test_log_trial_writes_the_curve_with_training_steps(logger, experiment, client) -> None:
    run_id = log(logger, experiment, REACHED)

    assert history(client, run_id, "curves/val_accuracy") == [(0, 0.5), (10, 0.75), (20, 0.925)]
    assert history(client, run_id, "progress/examples") == [(0, 0.0), (10, 640.0), (20, 1280.0)]
    assert history(client, run_id, "progress/train_seconds") == [(0, 0.0), (10, 0.25), (20, 0.5)]
    # The NaN train loss before any training is not logged.
    assert history(client, run_id, "curves/train_loss") == [(10, 0.6), (20, 0.3)]
    assert [s for s, _ in history(client, run_id, "curves/val_loss")] == [0, 10, 20]
    assert [s for s, _ in history(client, run_id, "curves/val_error")] == [0, 10, 20]
    assert history(client, run_id, "progress/step") == []


def test_log_trial_writes_summary_metrics_status_and_ends_the_run(
    logger, experiment, client
) -> None:
    run = client.get_run(log(logger, experiment, REACHED))
    metrics = run.data.metrics

    assert metrics["summary/steps_to_target"] == 20
    assert metrics["summary/examples_to_target"] == 1280
    assert metrics["summary/seconds_to_target"] == 0.5
    assert metrics["summary/steps_run"] == 20
    assert metrics["summary/steps_per_second"] == pytest.approx(40.0)
    assert metrics["summary/examples_per_second"] == pytest.approx(2560.0)
    assert history(client, run.info.run_id, "summary/steps_to_target") == [(20, 20.0)]
    assert run.data.tags["status"] == "reached"
    assert run.data.tags["replicas"] == "2"
    assert run.data.tags["devices"] == "/cpu:0,/cpu:1"
    assert run.info.status == "FINISHED"
    assert run.info.end_time is not None
    assert client.list_artifacts(run.info.run_id) == []


def test_log_trial_names_the_data_as_the_runs_training_input(logger, experiment, client) -> None:
    run = client.get_run(log(logger, experiment, dataclasses.replace(REACHED, dataset=DATA)))

    (used,) = run.inputs.dataset_inputs
    assert (used.dataset.name, used.dataset.digest) == (DATA.name, DATA.digest)
    assert json.loads(used.dataset.profile)["train_rows"] == DATA.train_rows
    assert [(t.key, t.value) for t in used.tags] == [("mlflow.data.context", "training")]
    assert client.get_run(log(logger, experiment, REACHED)).inputs.dataset_inputs == []


TIMED = dataclasses.replace(
    REACHED,
    timings={
        "build": 0.25,
        "trace": 0.5,
        "train": 0.5,
        "evaluate": 0.125,
        "bookkeeping": 0.0625,
        "wall": 1.4375,
    },
    environment={**ENVIRONMENT, "reused": True},
)


def test_log_trial_writes_where_the_time_went_in_one_batch(
    logger, experiment, client, monkeypatch
) -> None:
    run_id = logger.start_run(experiment, "trial")
    calls: list[str] = []
    for name in ("log_batch", "set_terminated", "log_metric", "log_param", "set_tag"):
        method = getattr(logger.client, name)
        monkeypatch.setattr(
            logger.client, name, lambda *a, _n=name, _m=method, **k: (calls.append(_n), _m(*a, **k))
        )
    logger.log_trial(run_id, SPEC, TIMED)
    monkeypatch.undo()
    run = client.get_run(run_id)

    assert calls == ["log_batch", "set_terminated"]  # timings cost no extra call
    timing = {k: v for k, v in run.data.metrics.items() if k.startswith("timing/")}
    assert timing == {f"timing/{k}_seconds": v for k, v in TIMED.timings.items()}
    assert history(client, run_id, "timing/wall_seconds") == [(20, 1.4375)]
    assert run.data.tags["reused"] == "true"
    assert history(client, run_id, "curves/val_accuracy") == [(0, 0.5), (10, 0.75), (20, 0.925)]


def test_untimed_trial_logs_no_timing_metrics(logger, experiment, client) -> None:
    run = client.get_run(log(logger, experiment, REACHED))
    assert not [k for k in run.data.metrics if k.startswith("timing/")]
    assert "reused" not in run.data.tags


def test_timing_metrics_skip_non_finite_parts() -> None:
    result = dataclasses.replace(REACHED, timings={"train": 0.5, "build": math.nan})
    assert [(m.key, m.value, m.step) for m in timing_metrics(result)] == [
        ("timing/train_seconds", 0.5, 20)
    ]


def test_study_timing_metrics_total_and_mean_each_part() -> None:
    summary = TimingSummary.of([TIMED, dataclasses.replace(TIMED, train_seconds=0.5)])

    metrics = study_timing_metrics(summary)

    assert metrics["timing/trials"] == 2
    assert metrics["timing/total_wall_seconds"] == pytest.approx(2.875)
    assert metrics["timing/mean_wall_seconds"] == pytest.approx(1.4375)
    assert metrics["timing/total_bookkeeping_seconds"] == pytest.approx(0.125)
    assert metrics["timing/train_share"] == pytest.approx(0.5 / 1.4375)
    assert study_timing_metrics(TimingSummary.of([REACHED])) == {}


def test_not_reached_trial_has_no_to_target_metrics(logger, experiment, client) -> None:
    result = TrialResult(
        state=TrialState.NOT_REACHED,
        steps_run=500,
        examples_run=32000,
        train_seconds=2.0,
        curve=REACHED.curve,
        environment=ENVIRONMENT,
    )
    run = client.get_run(log(logger, experiment, result))

    assert not any(k.endswith("_to_target") for k in run.data.metrics)
    assert run.data.metrics["summary/steps_run"] == 500
    assert run.data.tags["status"] == "not_reached"
    assert run.info.status == "FINISHED"


def test_failed_trial_is_failed_with_its_error(logger, experiment, client, tmp_path) -> None:
    error = "Traceback (most recent call last):\n  ...\nRuntimeError: boom\n"
    run_id = log(logger, experiment, TrialResult(state=TrialState.FAILED, error=error))
    run = client.get_run(run_id)

    assert run.info.status == "FAILED"
    assert run.data.tags["status"] == "failed"
    assert run.data.params["batch_size"] == "64"
    assert "per_replica_batch" not in run.data.params  # no environment: replicas unknown
    assert [a.path for a in client.list_artifacts(run_id)] == ["error.txt"]
    local = client.download_artifacts(run_id, "error.txt", str(tmp_path))
    assert Path(local).read_text(encoding="utf-8") == error


@pytest.mark.parametrize(
    ("state", "status"),
    [
        (TrialState.REACHED, "FINISHED"),
        (TrialState.NOT_REACHED, "FINISHED"),
        (TrialState.DIVERGED, "FINISHED"),
        (TrialState.PRUNED, "FINISHED"),
        (TrialState.FAILED, "FAILED"),
        (TrialState.INFEASIBLE, "FAILED"),
        (TrialState.INTERRUPTED, "KILLED"),
    ],
)
def test_run_status_follows_trial_state(logger, experiment, client, state, status) -> None:
    run = client.get_run(log(logger, experiment, TrialResult(state=state)))

    assert run.info.status == status
    assert run.data.tags["status"] == state.value


def test_only_errors_fail_and_only_interruptions_are_killed() -> None:
    ended = [s for s in TrialState if s not in (TrialState.RUNNING, TrialState.DISCARDED)]

    assert set(RUN_STATUS) == set(ended)
    assert {s for s, status in RUN_STATUS.items() if status == "FAILED"} == {
        TrialState.FAILED,
        TrialState.INFEASIBLE,
    }
    assert {s for s, status in RUN_STATUS.items() if status == "KILLED"} == {TrialState.INTERRUPTED}


def ui_sections(keys: list[str]) -> list[str]:
    """The chart sections of MLflow's metric tab, in order, for these keys: a key's section is
    what precedes its last ``/``; named sections come sorted, keys without ``/`` last."""
    named = sorted({k.rsplit("/", 1)[0] for k in keys if "/" in k})
    return named + (["Model metrics"] if any("/" not in k for k in keys) else [])


def test_curves_come_first_and_summary_numbers_last() -> None:
    metrics = curve_metrics(REACHED)
    keys = sorted({m.key for m in metrics})

    assert ui_sections(keys) == ["curves", "progress", "summary"]
    timing = sorted({m.key for m in timing_metrics(TIMED)})
    assert ui_sections(keys + timing) == ["curves", "progress", "summary", "timing"]
    assert [k for k in keys if k.startswith("curves/")] == [
        "curves/train_loss",
        "curves/val_accuracy",
        "curves/val_error",
        "curves/val_loss",
    ]
    summary = [m for m in metrics if m.key.startswith("summary/")]
    assert {m.step for m in summary} == {REACHED.steps_run}


def test_long_curve_is_logged_completely(logger, experiment, client) -> None:
    curve = tuple(measurement(10 * i, 1.0 / (i + 1), min(1.0, i / 400)) for i in range(400))
    result = TrialResult(
        state=TrialState.NOT_REACHED,
        steps_run=3990,
        examples_run=3990 * 64,
        train_seconds=99.75,
        curve=curve,
        environment=ENVIRONMENT,
    )
    run_id = log(logger, experiment, result)  # 2,400 curve metrics: several batches

    keys = ("curves/val_loss", "curves/val_accuracy", "curves/train_loss", "progress/examples")
    for key in (*keys, "progress/train_seconds"):
        assert [s for s, _ in history(client, run_id, key)] == [m.step for m in curve], key
    assert history(client, run_id, "curves/train_loss")[-1] == (3990, pytest.approx(1 / 400))
    assert client.get_run(run_id).data.metrics["summary/steps_run"] == 3990


def test_many_extra_params_and_tags(logger, experiment, client) -> None:
    extra = {f"extra.{i:03d}": i for i in range(150)}
    tags = {"tuner": "optuna", "stratum": "b64-mirrored:2"}
    run_id = log(logger, experiment, REACHED, extra_params=extra, tags=tags)
    run = client.get_run(run_id)

    assert all(run.data.params[k] == str(v) for k, v in extra.items())
    assert run.data.params["batch_size"] == "64"
    assert run.data.tags["tuner"] == "optuna"
    assert run.data.tags["stratum"] == "b64-mirrored:2"
    assert run.data.tags["status"] == "reached"
    assert history(client, run_id, "curves/val_accuracy") == [(0, 0.5), (10, 0.75), (20, 0.925)]
    assert run.info.status == "FINISHED"


# Experiments and runs


def test_experiment_is_created_once_with_artifacts_next_to_the_database(sqlite_logger) -> None:
    first = sqlite_logger.experiment_id("created-once")
    second = sqlite_logger.experiment_id("created-once")

    assert first == second
    db = Path(sqlite_logger.uri.removeprefix("sqlite:///"))
    location = sqlite_logger.client.get_experiment(first).artifact_location
    assert location == f"{(db.parent / 'artifacts').as_uri()}/created-once"


def test_experiment_is_created_once_on_a_server(logger, client) -> None:
    name = f"created-once-{SUFFIX}"
    first = logger.experiment_id(name)

    assert logger.experiment_id(name) == first
    assert [e.experiment_id for e in client.search_experiments() if e.name == name] == [first]


def test_deleted_experiment_is_restored(logger, client) -> None:
    experiment_id = logger.experiment_id(f"deleted-then-used-{SUFFIX}")
    client.delete_experiment(experiment_id)

    assert logger.experiment_id(f"deleted-then-used-{SUFFIX}") == experiment_id
    assert client.get_experiment(experiment_id).lifecycle_stage == "active"


def test_nested_run_points_at_its_parent(logger, experiment, client) -> None:
    parent = logger.start_run(experiment, "study")
    child = logger.start_run(experiment, "trial-0", parent_run_id=parent, tags={"k": "v"})
    run = client.get_run(child)

    assert run.data.tags["mlflow.parentRunId"] == parent
    assert run.data.tags["k"] == "v"
    assert run.info.run_name == "trial-0"


# tracking_uri and artifact_root


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("STUDY_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    return Path.cwd()


def test_tracking_uri_option_wins(clean_env, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///from-env.db")

    assert tracking_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


def test_tracking_uri_env_beats_the_default(clean_env, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///from-env.db")

    assert tracking_uri() == "sqlite:///from-env.db"
    assert tracking_uri(None) == "sqlite:///from-env.db"
    assert not (clean_env / "mlruns").exists()


def test_tracking_uri_default_is_sqlite_under_the_store_root(clean_env) -> None:
    uri = tracking_uri()

    assert uri == f"sqlite:///{clean_env / 'mlruns' / 'mlflow.db'}"
    assert (clean_env / "mlruns").is_dir()


def test_tracking_uri_empty_env_falls_back_to_the_default(clean_env, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")

    assert tracking_uri() == f"sqlite:///{clean_env / 'mlruns' / 'mlflow.db'}"


def test_tracking_uri_default_follows_study_home(clean_env, monkeypatch) -> None:
    monkeypatch.setenv("STUDY_HOME", str(clean_env / "elsewhere"))

    assert tracking_uri() == f"sqlite:///{clean_env / 'elsewhere' / 'mlflow.db'}"
    assert (
        tracking_uri(root=clean_env / "given") == f"sqlite:///{clean_env / 'given' / 'mlflow.db'}"
    )


def test_artifact_root(tmp_path: Path) -> None:
    assert artifact_root(f"sqlite:///{tmp_path}/m.db") == (tmp_path / "artifacts").as_uri()
    assert artifact_root("http://127.0.0.1:5000") is None


def test_experiments_open_in_the_model_training_view(logger, client) -> None:
    from study.tracking.mlflow_logger import EXPERIMENT_KIND, MODEL_TRAINING

    new = client.get_experiment(logger.experiment_id(f"fresh-{SUFFIX}"))
    assert new.tags[EXPERIMENT_KIND] == MODEL_TRAINING
    legacy = client.create_experiment(f"legacy-{SUFFIX}")
    assert EXPERIMENT_KIND not in client.get_experiment(legacy).tags
    assert logger.experiment_id(f"legacy-{SUFFIX}") == legacy
    assert client.get_experiment(legacy).tags[EXPERIMENT_KIND] == MODEL_TRAINING


def test_an_experiment_tag_another_process_set_at_the_same_moment_is_no_error(
    sqlite_logger: MlflowLogger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.exceptions import MlflowException

    experiment = sqlite_logger.experiment_id(f"tag-race-{SUFFIX}")
    client = sqlite_logger.client
    set_tag = client.set_experiment_tag

    def racing(experiment_id: str, key: str, value: str) -> None:
        set_tag(experiment_id, key, value)  # the other process's write lands first
        raise MlflowException("UNIQUE constraint failed: experiment_tags.key")

    monkeypatch.setattr(client, "set_experiment_tag", racing)
    sqlite_logger.set_experiment_tag(experiment, "study.view", "v")  # no error
    assert client.get_experiment(experiment).tags["study.view"] == "v"

    monkeypatch.setattr(client, "set_experiment_tag", lambda *a: racing(experiment, "x", "y"))
    with pytest.raises(MlflowException):  # a tag that is still missing: the error stands
        sqlite_logger.set_experiment_tag(experiment, "other", "v")
