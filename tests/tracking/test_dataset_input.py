"""A trial's data as an MLflow dataset input: the fields MLflow's UI reads (name, digest,
source, schema table, profile) and the context tag; a dataset another process stored first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from study.results import DataDescription
from study.tracking.dataset_input import dataset_input, log_dataset, mlflow_dataset

GENERATED = DataDescription(
    name="mnist1d(samples=4000)",
    source="mnist1d(samples=4000, seed=42)",
    digest="0123456789abcdef",
    train_rows=3200,
    val_rows=800,
    schema=(("features", "float32[40]"), ("label", "int32[]"), ("outputs", "10")),
)


def test_generated_data_are_a_code_source_with_a_schema_table_and_row_counts() -> None:
    data = mlflow_dataset(GENERATED)

    assert (data.name, data.digest, data.source_type) == (
        "mnist1d(samples=4000)",
        "0123456789abcdef",
        "code",
    )
    assert json.loads(data.source) == {"tags": {"study.data": "mnist1d(samples=4000, seed=42)"}}
    assert json.loads(data.schema) == {
        "mlflow_colspec": [
            {"name": "features", "type": "float32[40]"},
            {"name": "label", "type": "int32[]"},
            {"name": "outputs", "type": "10"},
        ]
    }
    assert json.loads(data.profile) == {
        "train_rows": 3200,
        "validation_rows": 800,
        "source": "mnist1d(samples=4000, seed=42)",
    }


def test_files_are_a_local_source_and_the_input_is_for_training() -> None:
    described = DataDescription(
        name="t.csv (csv)",
        source="/data/t.csv",
        digest="fedcba9876543210",
        train_rows=8,
        val_rows=2,
        source_type="local",
    )
    used = dataset_input(described)

    assert used.dataset.source_type == "local"
    assert json.loads(used.dataset.source) == {"uri": "/data/t.csv"}
    assert used.dataset.schema is None
    assert [(t.key, t.value) for t in used.tags] == [("mlflow.data.context", "training")]


class _Racing:
    """A client whose first ``log_inputs`` loses the race MLflow's store can lose: another
    process stores the same dataset between the look-up and the insert."""

    def __init__(self, client: MlflowClient, other_run: str) -> None:
        self.client = client
        self.other_run = other_run
        self.calls = 0

    def log_inputs(self, run_id: str, datasets: list) -> None:
        self.calls += 1
        if self.calls == 1:
            self.client.log_inputs(self.other_run, datasets)  # the other process, first
            raise MlflowException(
                "(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, "
                "datasets.name, datasets.digest"
            )
        self.client.log_inputs(run_id, datasets)


def test_a_dataset_another_process_stored_first_is_asked_for_again(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("race", artifact_location=str(tmp_path / "art"))
    mine, theirs = (client.create_run(experiment).info.run_id for _ in range(2))
    racing = _Racing(client, theirs)

    log_dataset(racing, mine, dataset_input(GENERATED))

    assert racing.calls == 2
    for run in (mine, theirs):
        inputs = client.get_run(run).inputs.dataset_inputs
        assert [(i.dataset.name, i.dataset.digest) for i in inputs] == [
            ("mnist1d(samples=4000)", "0123456789abcdef")
        ]


def test_another_failure_to_log_the_dataset_is_raised() -> None:
    class Broken:
        def log_inputs(self, run_id: str, datasets: list) -> None:
            raise MlflowException("RESOURCE_DOES_NOT_EXIST: run 'r' not found")

    with pytest.raises(MlflowException, match="not found"):
        log_dataset(Broken(), "r", dataset_input(GENERATED))
