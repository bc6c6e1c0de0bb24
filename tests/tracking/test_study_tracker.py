"""The parent run's params (`study_params`): what the study searches, and how steps to target
are read (the hold rule) and trials seeded; and on a tracking server, what the runs show: the
study's data as a dataset input of every trial and once of the parent (a resumed study too),
the parent's description with its answer, trial names with their numbers, the saved view."""

from __future__ import annotations

import copy
import json
import uuid

import pytest
from mlflow.tracking import MlflowClient

from study.config.space import Stratum
from study.config.studyfile import parse_study
from study.ledger import LedgerTrial
from study.results import TrialResult, TrialState
from study.tracking.dataset_input import mlflow_dataset
from study.tracking.descriptions import ANSWER_HEADING, NOTE, with_answer
from study.tracking.study_tracker import StudyTracker, study_params
from study.tracking.views import view_tag
from tests.config.test_studyfile import BASE
from tests.fakes import tabular_spec
from tests.tracking.test_dataset_input import GENERATED as DATA


def params_of(**changes: object) -> dict:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return study_params(parse_study(data, "x.yaml"), tuner="both", trials_total=8, strata=2)


def test_the_parent_run_names_the_hold_rule_and_the_seeding() -> None:
    plain = params_of(seed=3)
    assert (plain["target_hold"], plain["training_seeds"], plain["seed"]) == (
        "5%,5",
        "per_trial",
        3,
    )
    other = params_of(target_hold={"fraction": 0.1, "min_steps": 20}, training_seeds="pinned")
    assert (other["target_hold"], other["training_seeds"]) == ("10%,20", "pinned")
    assert params_of(target_hold="off")["target_hold"] == "off"


def test_the_parent_run_names_the_study_a_warm_start_came_from() -> None:
    assert "warm_start" not in params_of()
    tuner = {**BASE.get("tuner", {}), "warm_start": "d4000"}
    assert params_of(tuner=tuner)["warm_start"] == "d4000"


# The pages a study's runs show, on a tracking server


def finished(number: int) -> LedgerTrial:
    result = TrialResult(TrialState.REACHED, steps_run=40, steps_to_target=40, dataset=DATA)
    return LedgerTrial(
        stratum=Stratum(64, "default"),
        number=number,
        status=TrialState.REACHED,
        params={"learning_rate": 0.1},
        result=result,
        tuner="optuna",
        origin="sampler",
    )


def test_the_data_reach_every_trial_and_the_parent_once_even_when_resumed(
    mlflow_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"pages-{uuid.uuid4().hex[:8]}"
    first = StudyTracker(mlflow_server, name)
    parent = first.ensure_parent({"study": name}, {}, note=with_answer("Q1", None))
    for number in (0, 1):
        first.finish_trial(finished(number), tabular_spec(batch_size=64))
    first.describe_answer("B_noise 734 (454-1339)")
    first.close()

    resumed = StudyTracker(mlflow_server, name)  # `study resume`: a new process
    calls: list[str] = []
    log_inputs = resumed.logger.client.log_inputs
    monkeypatch.setattr(
        resumed.logger.client,
        "log_inputs",
        lambda run_id, datasets: calls.append(run_id) or log_inputs(run_id, datasets),
    )
    assert resumed.ensure_parent({"study": name}, {}, note=with_answer("Q2", None)) == parent
    resumed.finish_trial(finished(2), tabular_spec(batch_size=64))
    resumed.close()

    client = MlflowClient(mlflow_server)
    run = client.get_run(parent)
    assert [(i.dataset.name, i.dataset.digest) for i in run.inputs.dataset_inputs] == [
        (DATA.name, DATA.digest)
    ]
    assert parent not in calls and len(calls) == 1  # the trial's run only
    assert run.data.tags[NOTE] == f"Q2\n\n{ANSWER_HEADING}\n\nB_noise 734 (454-1339)\n"
    trials = [r for r in client.search_runs([first.experiment_id]) if r.info.run_id != parent]
    assert sorted(r.info.run_name for r in trials) == [
        f"b64/default#{n} lr 0.1: 40 steps (reached)" for n in range(3)
    ]
    for trial in trials:
        (used,) = client.get_run(trial.info.run_id).inputs.dataset_inputs
        assert (used.dataset.name, used.dataset.profile) == (
            DATA.name,
            mlflow_dataset(DATA).profile,
        )
    view = client.get_experiment(first.experiment_id).tags[view_tag()]
    assert json.loads(json.loads(view)["state"])["runsExpanded"] == {parent: True}


def test_a_parent_run_another_process_created_in_the_same_moment_is_adopted(tmp_path) -> None:
    # Two processes searched at once and found no parent; this one kept its own run, the other
    # process's run (older) landed just after this one's search. Before logging anything
    # under its parent, this tracker adopts the oldest and deletes its own.
    uri = f"sqlite:///{tmp_path / 'race.db'}"
    name = "race"
    tracker = StudyTracker(uri, name)
    mine = tracker.ensure_parent({"study": name}, {})
    client = MlflowClient(uri)
    started = client.get_run(mine).info.start_time
    other = other_parent(client, tracker.experiment_id, name, start_time=started - 1000)
    tracker.finish_trial(finished(0), tabular_spec(batch_size=64))
    tracker.end_parent("FINISHED")
    tracker.close()

    assert tracker.parent_run_id == other
    assert client.get_run(mine).info.lifecycle_stage == "deleted"
    assert trial_parent(client, tracker.experiment_id) == other
    assert client.get_run(other).info.status == "FINISHED"
    # The experiment's saved view unfolds the parent that stays.
    assert other in client.get_experiment(tracker.experiment_id).tags[view_tag()]


def test_a_parent_run_no_other_process_raced_is_kept(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'alone.db'}"
    tracker = StudyTracker(uri, "alone")
    mine = tracker.ensure_parent({"study": "alone"}, {})
    tracker.finish_trial(finished(0), tabular_spec(batch_size=64))
    tracker.close()
    assert tracker.parent_run_id == mine
    assert MlflowClient(uri).get_run(mine).info.lifecycle_stage == "active"


def trial_parent(client: MlflowClient, experiment_id: str) -> str:
    """The parent run id of the experiment's one trial run."""
    (trial,) = [
        r for r in client.search_runs([experiment_id]) if r.data.tags.get("study.role") != "parent"
    ]
    return trial.data.tags["mlflow.parentRunId"]


def racing(tmp_path) -> tuple[StudyTracker, MlflowClient]:
    """A tracker of study ``race`` on a fresh SQLite store, and a client of that store."""
    uri = f"sqlite:///{tmp_path / 'race.db'}"
    return StudyTracker(uri, "race"), MlflowClient(uri)


def other_parent(client: MlflowClient, experiment_id: str, name: str, start_time: int) -> str:
    """A parent run of study ``name`` as another process creates it."""
    tags = {"study.role": "parent", "study.name": name}
    run = client.create_run(experiment_id, start_time=start_time, tags=tags)
    return run.info.run_id


def test_a_parent_run_deleted_while_it_is_adopted_is_given_up_for_the_oldest(tmp_path) -> None:
    # Several processes start at once: this one finds another's run and adopts it, and that
    # process, settling, deletes it for a run older still (a traceback in the chaos test).
    tracker, client = racing(tmp_path)
    name = tracker.study
    found = other_parent(client, tracker.experiment_id, name, start_time=2_000_000)
    older: list[str] = []
    update_run = tracker.logger.client.update_run

    def deleted_first(run_id: str, *args: object, **kwargs: object) -> None:
        if not older:  # the other process settles: an older run, its own deleted
            older.append(other_parent(client, tracker.experiment_id, name, 1_000_000))
            client.delete_run(found)
        update_run(run_id, *args, **kwargs)

    tracker.logger.client.update_run = deleted_first  # type: ignore[method-assign]
    parent = tracker.ensure_parent({"study": name}, {})
    tracker.close()

    assert parent == older[0] == tracker.parent_run_id
    assert client.get_run(parent).info.status == "RUNNING"
    assert client.get_run(found).info.lifecycle_stage == "deleted"


def test_a_parent_run_adopted_when_an_older_lands_after_is_left_for_the_older(tmp_path) -> None:
    # This process adopted another's run; a run older still landed just after its search.
    # It moves to the oldest and leaves the run it adopted to its creator (no delete here).
    tracker, client = racing(tmp_path)
    name = tracker.study
    adopted = other_parent(client, tracker.experiment_id, name, start_time=2_000_000)
    assert tracker.ensure_parent({"study": name}, {}) == adopted
    oldest = other_parent(client, tracker.experiment_id, name, start_time=1_000_000)
    tracker.finish_trial(finished(0), tabular_spec(batch_size=64))
    tracker.close()

    assert tracker.parent_run_id == oldest
    assert client.get_run(adopted).info.lifecycle_stage == "active"
    assert trial_parent(client, tracker.experiment_id) == oldest
