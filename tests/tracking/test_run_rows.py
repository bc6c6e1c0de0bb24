"""Whole trial runs written in one transaction (`study.tracking.run_rows`, the tracker's batches)
read back as MLflow's public calls write them: a study's trials logged by a tracker whose jobs
gather (each trial started and finished before its run is opened) and by one made to open each
run first hold the same runs, params, tags, metric histories, datasets, artifacts and statuses,
and what the trials say. A store that refuses the write gets nothing from it, and trials a
process finished but never wrote reach MLflow through the next process's repair."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import sqlalchemy
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import Ledger, LedgerTrial, StudyRecord
from study.ledger.owners import owner_id
from study.results import Measurement, TrialResult, TrialState
from study.tracking.run_rows import NewRun, insert_runs
from study.tracking.study_tracker import StudyTracker
from tests.config.test_studyfile import BASE
from tests.fakes import tabular_spec, write_ledger
from tests.tracking.test_dataset_input import GENERATED as DATA

STUDY = "whole"


def curve(steps: int, nan_at: int | None = None) -> tuple[Measurement, ...]:
    return tuple(
        Measurement(
            step=s,
            examples=s * 64,
            train_seconds=s * 0.01,
            train_loss=math.nan if s == nan_at else 1.0 / (s + 1),
            metrics={"val_accuracy": s / (steps + 1), "val_loss": 2.0 - s / steps},
        )
        for s in range(0, steps + 1, 5)
    )


def trial(number: int, result: TrialResult, status: TrialState) -> LedgerTrial:
    return LedgerTrial(
        stratum=Stratum(64, "default"),
        number=number,
        status=status,
        params={"learning_rate": 0.01 * (number + 1)},
        result=result,
        tuner="optuna",
        origin="sampler",
        owner=owner_id(),
    )


def trials() -> list[LedgerTrial]:
    """A reached trial (with its data, timings and a NaN loss), a pruned one, a failed one
    (with its error) and an interrupted one."""
    reached = TrialResult(
        TrialState.REACHED,
        steps_run=60,
        examples_run=3840,
        train_seconds=0.6,
        steps_to_target=55,
        examples_to_target=3520,
        seconds_to_target=0.55,
        curve=curve(60, nan_at=10),
        dataset=DATA,
        environment={"strategy": "default", "replicas": 1, "reused": True},
        timings={"build": 0.1, "train": 0.6, "wall": 0.9},
    )
    pruned = dataclasses.replace(reached, state=TrialState.PRUNED, steps_to_target=None)
    failed = TrialResult(TrialState.FAILED, steps_run=5, curve=curve(5), error="Traceback: boom")
    stopped = TrialResult(TrialState.FAILED, steps_run=10, curve=curve(10), dataset=DATA)
    return [
        trial(0, reached, TrialState.REACHED),
        trial(1, pruned, TrialState.PRUNED),
        trial(2, failed, TrialState.FAILED),
        trial(3, stopped, TrialState.INTERRUPTED),
    ]


def log_study(root: Path, *, whole: bool) -> tuple[MlflowClient, str, list[int]]:
    """Log `trials` with a tracker into a new store under ``root``: gathered (``whole``) or each
    run opened before its trial finishes; the client, parent run id and the batch sizes of
    the whole writes."""
    tracker = StudyTracker(f"sqlite:///{root / 'mlflow.db'}", STUDY)
    parent = tracker.ensure_parent({"study": STUDY}, {})
    batches: list[int] = []
    create = tracker.logger.create_trials
    tracker.logger.create_trials = lambda e, runs: batches.append(len(runs)) or create(e, runs)  # type: ignore[method-assign]
    for t in trials():
        spec = tabular_spec(batch_size=64)
        tracker.start_trial(t)
        if not whole:
            tracker.flush()
        tracker.finish_trial(t, spec, t.result)
        if not whole:
            tracker.flush()
    tracker.close()
    assert tracker.errors == []
    return MlflowClient(tracker.logger.uri), parent, batches


def contents(client: MlflowClient, parent: str) -> dict[str, dict[str, Any]]:
    """Each trial run's contents by trial key, its ids and times left out."""
    (experiment,) = [e for e in client.search_experiments() if e.name == STUDY]
    out = {}
    for run in client.search_runs([experiment.experiment_id]):
        if run.info.run_id == parent:
            continue
        run_id, info = run.info.run_id, run.info
        tags = dict(run.data.tags)
        assert tags.pop("mlflow.parentRunId") == parent
        assert info.artifact_uri == f"{experiment.artifact_location}/{run_id}/artifacts"
        assert info.start_time and info.end_time and info.start_time <= info.end_time
        full = client.get_run(run_id)
        out[tags["study.trial"]] = {
            "info": (info.run_name, info.status, info.lifecycle_stage, info.user_id),
            "params": run.data.params,
            "tags": tags,
            "latest": {k: v for k, v in run.data.metrics.items() if not math.isnan(v)},
            "history": {
                key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
                for key in run.data.metrics
            },
            "inputs": [dataset_row(d) for d in full.inputs.dataset_inputs],
            "artifacts": {
                a.path: Path(client.download_artifacts(run_id, a.path)).read_text()
                for a in client.list_artifacts(run_id)
            },
        }
    return out


def dataset_row(used: Any) -> tuple[Any, ...]:
    """A dataset input's fields and tags."""
    data, tags = used.dataset, [(t.key, t.value) for t in used.tags]
    return (data.name, data.digest, data.source_type, data.source, data.schema, data.profile, tags)


def stored_runs(db: Path) -> list[dict[str, Any]]:
    """Every column of the store's trial runs (their ids, times and paths left out), by name."""
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            rows = connection.execute(sqlalchemy.text("SELECT * FROM runs")).mappings().all()
    finally:
        engine.dispose()
    varying = {"run_uuid", "start_time", "end_time", "artifact_uri"}
    kept = [{k: v for k, v in r.items() if k not in varying} for r in rows if r["name"] != STUDY]
    return sorted(kept, key=lambda r: r["name"])


def test_whole_runs_read_back_as_the_public_calls_write_them(tmp_path: Path) -> None:
    (tmp_path / "whole").mkdir()
    (tmp_path / "public").mkdir()
    client, parent, batches = log_study(tmp_path / "whole", whole=True)
    other, other_parent, opened = log_study(tmp_path / "public", whole=False)

    assert sum(batches) == 4 and opened == []  # gathered: every trial written whole
    ours, theirs = contents(client, parent), contents(other, other_parent)
    assert ours.keys() == theirs.keys() == {f"{STUDY}/b64/default#{n}" for n in range(4)}
    for key, expected in theirs.items():
        for part, value in expected.items():
            assert ours[key][part] == value, (key, part)
    assert stored_runs(tmp_path / "whole" / "mlflow.db") == stored_runs(
        tmp_path / "public" / "mlflow.db"
    )
    # And what the trials say: their learning rate, status, every point of their curves.
    reached = ours[f"{STUDY}/b64/default#0"]
    assert reached["info"][:2] == ("b64/default#0 lr 0.01: 55 steps (reached)", "FINISHED")
    assert (reached["params"]["hp.learning_rate"], reached["tags"]["reused"]) == ("0.01", "true")
    assert len(reached["history"]["curves/val_accuracy"]) == 13
    assert len(reached["history"]["curves/train_loss"]) == 12  # the NaN point left out
    assert reached["history"]["summary/steps_to_target"] == [(60, 55.0)]
    assert reached["inputs"][0][:2] == (DATA.name, DATA.digest)
    assert ours[f"{STUDY}/b64/default#2"]["artifacts"] == {"error.txt": "Traceback: boom"}
    statuses = [(ours[f"{STUDY}/b64/default#{n}"]["info"][1]) for n in range(4)]
    assert statuses == ["FINISHED", "FINISHED", "FAILED", "KILLED"]
    assert ours[f"{STUDY}/b64/default#3"]["tags"]["status"] == "interrupted"


def test_a_store_that_refuses_the_write_gets_nothing_from_it(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("gone")
    run = NewRun("r", 1, 2, "FINISHED", {"mlflow.runName": "r"}, [Param("p", "1")], [])
    bad = dataclasses.replace(run, metrics=[Metric("m", 1.0, 1, 0)], params=[Param("p" * 300, "")])
    assert insert_runs(client, experiment, [run, bad]) is None  # a key MLflow refuses
    client.delete_experiment(experiment)
    assert insert_runs(client, experiment, [run]) is None  # a deleted experiment
    assert client.search_runs([experiment], run_view_type=3) == []
    assert insert_runs(MlflowClient("http://127.0.0.1:9"), experiment, [run]) is None


def test_trials_a_process_finished_but_never_wrote_are_logged_by_the_next(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    space = {**BASE["search_space"], "batch_size": [64]}
    config = parse_study({**BASE, "name": STUDY, "search_space": space}, "x.yaml")
    ledger = Ledger.open(str(tmp_path / "j.journal"), STUDY)
    stored = write_ledger(ledger, StudyRecord(STUDY, config_text="name: whole"), trials()[:2])
    dead = StudyTracker(uri, STUDY)
    dead.ensure_parent({"study": STUDY}, {})
    dead.submit = lambda job, key=None: None  # type: ignore[method-assign]  # dies first
    for t in stored:
        dead.start_trial(t)
        dead.finish_trial(t, tabular_spec(batch_size=64), t.result)
    dead.close()
    client = MlflowClient(uri)
    assert len(client.search_runs([dead.experiment_id])) == 1  # the parent only

    resumed = StudyTracker(uri, STUDY)  # `study resume`: its repair logs them from the ledger
    resumed.ensure_parent({"study": STUDY}, {})
    resumed.repair(ledger, config, [Stratum(64, "default")])
    resumed.close()
    runs = resumed.trial_runs()
    assert sorted(runs) == [f"{STUDY}/b64/default#{t.number}" for t in stored]
    assert [runs[k].info.status for k in sorted(runs)] == ["FINISHED", "FINISHED"]
    for run in runs.values():
        assert len(client.get_metric_history(run.info.run_id, "curves/val_loss")) == 13
