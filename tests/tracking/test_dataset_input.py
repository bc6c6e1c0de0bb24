"""A trial's data as an MLflow dataset input: the fields MLflow's UI reads (name, digest,
source, schema table, profile) and the context tag."""

from __future__ import annotations

import json

from study.results import DataDescription
from study.tracking.dataset_input import dataset_input, mlflow_dataset

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
