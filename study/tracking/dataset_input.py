"""A trial's data as an MLflow dataset input (the runs table's Dataset column, the run page's
"Datasets used").

One dataset per study data, train and validation together (``mlflow.data.context`` =
``training``): its digest covers both splits (`study.workloads.describe`), and MLflow keeps
one input per (name, digest) and run. The dataset's fields, from a `DataDescription`:

- ``name`` and ``digest`` as described; ``source_type`` ``code`` (generated) or ``local``;
- ``source``: JSON as MLflow's own sources write it: ``{"tags": {"study.data": CALL}}`` for
  generated data (`CodeDatasetSource`), ``{"uri": PATH}`` for files;
- ``schema``: ``{"mlflow_colspec": [{"name": ..., "type": ...}]}`` (the UI's schema table);
- ``profile``: ``{"train_rows": N, "validation_rows": M, "source": ...}`` (the UI lists it).

Two processes of one study log the same dataset at the same moment (their first trials end
together): MLflow looks the dataset up, finds none, and both insert it; the second insert breaks
the store's unique constraint. `log_dataset` then asks once more, and finds the first one's.

Example: MNIST-1D with 4,000 samples is ``mnist1d(samples=4000)``, digest ``3f2a...``,
profile ``{"train_rows": 3200, "validation_rows": 800, "source": "mnist1d(samples=4000,
seed=42)"}``.
"""

from __future__ import annotations

import json
from typing import Any

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.exceptions import MlflowException

from study.results import DataDescription

#: How the stores say that a row with the same key went in first (SQLite, PostgreSQL, MySQL).
_DUPLICATE = ("UNIQUE constraint failed", "duplicate key value", "Duplicate entry")
#: The input tag naming what a dataset was used for, and its value for the study's data.
CONTEXT = "mlflow.data.context"
TRAINING = "training"


def mlflow_dataset(description: DataDescription) -> Dataset:
    """The MLflow dataset entity of ``description``."""
    if description.source_type == "local":
        source = {"uri": description.source}
    else:
        source = {"tags": {"study.data": description.source}}
    schema = [{"name": name, "type": kind} for name, kind in description.schema]
    profile = {
        "train_rows": description.train_rows,
        "validation_rows": description.val_rows,
        "source": description.source,
    }
    return Dataset(
        name=description.name,
        digest=description.digest,
        source_type=description.source_type,
        source=json.dumps(source),
        schema=json.dumps({"mlflow_colspec": schema}) if schema else None,
        profile=json.dumps(profile),
    )


def dataset_input(description: DataDescription) -> DatasetInput:
    """``description`` as a training input of a run."""
    return DatasetInput(mlflow_dataset(description), tags=[InputTag(CONTEXT, TRAINING)])


def log_dataset(client: Any, run_id: str, data: DatasetInput) -> None:
    """``client.log_inputs(run_id, [data])``, asked once more when another process stored the
    same dataset between MLflow's look-up and its insert."""
    try:
        client.log_inputs(run_id, [data])
    except MlflowException as exc:
        if not any(said in str(exc) for said in _DUPLICATE):
            raise
        client.log_inputs(run_id, [data])
