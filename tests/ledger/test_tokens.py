"""Writes that know whether their first attempt landed (`study.ledger.tokens`, through
`RetryingStorage`), under faults injected at the database (`tests/ledger/contract.py`): two
processes claiming one round, or beginning one branch reference, while a commit's answer is
lost have exactly one winner; a waiting trial taken by a commit whose answer was lost is the
claimant's; a study deleted by such a commit is deleted; the tokens stay out of every read."""

from __future__ import annotations

import multiprocessing
import pickle
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.study import StudyDirection
from optuna.trial import TrialState

from study.ext.branch.ledger import BranchLedger
from study.ledger import Ledger, StudyRecord, open_storage
from study.ledger.retry import RetryingStorage
from study.ledger.tokens import CREATED_BY, HIDDEN, STATE_BY, LedgerRDB
from tests.ledger.contract import FAULTS, Faults, StorageSupplier

MIN = [StudyDirection.MINIMIZE]


def faulty(storage: Any, kind: str) -> Faults:
    """Faults of ``kind`` on the database under an `open_storage` storage; retries at once."""
    faults = Faults(kind)
    faults.attach(storage.inner._backend.engine)
    storage._sleep = lambda seconds: None
    storage.outage.say = lambda line: None
    return faults


def _contend(url: str, role: str, what: str, events: dict[str, Any], results: Any) -> None:
    """One of two processes taking the same claim (``what``: a round or a branch reference).

    ``first``: its commit lands and its answer is lost. ``second``: its first attempt fails
    before the commit, while the claim is still free, and it retries after the first's commit
    landed: the order in which the old retry gave both processes the win."""
    ledger = Ledger.open(url, "s")
    storage = ledger.storage
    faulty(storage, "lost_answer" if role == "first" else "before_commit")
    if role == "first":
        events["second_failed"].wait(30)
        storage._sleep = lambda seconds: events["landed"].set()  # its commit is in
    else:
        storage._sleep = lambda seconds: (events["second_failed"].set(), events["landed"].wait(30))
    won = ledger.notes.claim_round(1) if what == "round" else BranchLedger.of(ledger).begin()
    results.put((role, won))


@pytest.mark.slow
@pytest.mark.parametrize("what", ["round", "branch reference"])
def test_two_processes_claiming_under_a_lost_answer_have_one_winner(
    tmp_path: Path, what: str
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    Ledger.open(url, "s").create(StudyRecord("s", config_text="name: s\n", trials_total=2))
    context = multiprocessing.get_context("fork")
    events = {"second_failed": context.Event(), "landed": context.Event()}
    results = context.Queue()
    processes = [
        context.Process(target=_contend, args=(url, role, what, events, results))
        for role in ("first", "second")
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [p.exitcode for p in processes] == [0, 0]
    won = dict(results.get(timeout=5) for _ in processes)
    assert won == {"first": True, "second": False}  # the old retry: both True


@pytest.mark.parametrize("kind", FAULTS[1:])
def test_a_waiting_trial_taken_under_a_fault_is_the_claimants(tmp_path: Path, kind: str) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'ledger.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    study.enqueue_trial({"x": 1.0})
    faults = faulty(storage, kind)
    trial = study.ask()  # the old retry: the queued trial skipped, left running with no owner
    assert faults.fired >= 1
    assert trial.number == 0 and study.get_trials()[0].system_attrs["fixed_params"]
    assert [t.state for t in study.get_trials()] == [TrialState.RUNNING]


def test_a_trial_another_process_took_is_not_taken_twice(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    mine, theirs = open_storage(url), open_storage(url)
    study_id = mine.create_new_study(MIN, "s")
    trial_id = mine.create_new_trial(study_id, optuna.trial.create_trial(state=TrialState.WAITING))
    faulty(mine, "before_commit")
    mine._sleep = lambda seconds: theirs.set_trial_state_values(trial_id, TrialState.RUNNING)
    assert mine.set_trial_state_values(trial_id, TrialState.RUNNING) is False


@pytest.mark.parametrize("kind", FAULTS[1:])
def test_writes_under_a_fault_land_once(tmp_path: Path, kind: str) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'ledger.db'}")
    faults = faulty(storage, kind)
    study_id = storage.create_new_study(MIN)  # unnamed: its name is chosen before the call
    trial_id = storage.create_new_trial(study_id)
    storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [1.0])
    assert [s._study_id for s in storage.get_all_studies()] == [study_id]
    assert [(t.state, t.values) for t in storage.get_all_trials(study_id)] == [
        (TrialState.COMPLETE, [1.0])
    ]
    storage.delete_study(study_id)  # the old retry: KeyError once the first attempt landed
    assert storage.get_all_studies() == []
    assert faults.fired >= 4


def test_the_tokens_are_stored_and_hidden(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'ledger.db'}")
    study = optuna.create_study(storage=storage, study_name="s")
    study.enqueue_trial({"x": 1.0})
    study.tell(study.ask(), 1.0)
    raw, trial = storage.inner, study.trials[0]
    assert set(raw.get_study_system_attrs(study._study_id)) == {CREATED_BY}
    assert {CREATED_BY, STATE_BY} <= set(raw.get_trial(trial._trial_id).system_attrs)
    assert HIDDEN.isdisjoint(storage.get_study_system_attrs(study._study_id))
    assert HIDDEN.isdisjoint(storage.get_all_studies()[0].system_attrs)
    assert HIDDEN.isdisjoint(trial.system_attrs)
    assert HIDDEN.isdisjoint(storage.get_trial_system_attrs(trial._trial_id))
    assert HIDDEN.isdisjoint(storage.get_best_trial(study._study_id).system_attrs)


def test_open_storage_builds_what_the_contract_suite_tests(tmp_path: Path) -> None:
    storage = open_storage(f"sqlite:///{tmp_path / 'ledger.db'}")
    assert isinstance(storage, RetryingStorage)
    assert type(storage.inner) is optuna.storages._CachedStorage
    assert type(storage.inner._backend) is LedgerRDB
    with StorageSupplier("open_storage/plain") as supplied:
        assert type(supplied.inner) is type(storage.inner)
        assert type(supplied.inner._backend) is type(storage.inner._backend)


def test_the_wrapper_pickles_and_keeps_optunas_heartbeat(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        rdb = LedgerRDB(url, heartbeat_interval=5)
    storage = RetryingStorage(rdb, url)
    assert is_heartbeat_enabled(storage) and storage.get_heartbeat_interval() == 5
    assert not is_heartbeat_enabled(open_storage(url))  # no interval: none kept
    storage.create_new_study(MIN, "s")
    back = pickle.loads(pickle.dumps(storage))
    assert [s.study_name for s in back.get_all_studies()] == ["s"]
