"""A trial's metrics in one insert into a SQL store read back as MLflow's own log_batch writes
them: the history of every key and the run's latest values."""

from __future__ import annotations

import math
from pathlib import Path

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from study.tracking.metric_rows import insert_metrics


def _metrics() -> list[Metric]:
    points = [Metric("curves/val_loss", 1.0 / (s + 1), 1000 + s, s) for s in range(0, 300, 3)]
    points += [Metric("curves/val_accuracy", s / 300, 1000, s) for s in range(0, 300, 3)]
    points.append(Metric("curves/val_accuracy", 0.5, 1000, 3))  # a second value at one step
    points.append(Metric("curves/val_loss", 1.0, 1000, 0))  # a duplicate: written once
    points.append(Metric("summary/steps", math.nan, 999, 297))
    points.append(Metric("summary/big", math.inf, 999, 297))
    return points


def test_one_insert_reads_back_as_log_batch_writes_it(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("e")
    ours, theirs = (client.create_run(experiment).info.run_id for _ in range(2))
    assert insert_metrics(client, ours, _metrics())
    client.log_batch(theirs, metrics=_metrics())
    ran, expected = client.get_run(ours).data.metrics, client.get_run(theirs).data.metrics
    assert ran.keys() == expected.keys() == {
        "curves/val_loss", "curves/val_accuracy", "summary/steps", "summary/big"
    }  # fmt: skip
    for key in expected:
        if not math.isnan(expected[key]):
            assert ran[key] == expected[key]

        def rows(run: str, key: str = key) -> list[tuple[int, int, float]]:
            history = client.get_metric_history(run, key)
            return sorted((m.step, m.timestamp, m.value) for m in history if m.value == m.value)

        assert rows(ours) == rows(theirs)
    client.set_terminated(ours)
    assert not insert_metrics(client, ours, _metrics())  # a closed run: log_batch says why
