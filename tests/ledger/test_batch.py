"""`study.ledger.batch`: a trial's writes in one transaction on a real PostgreSQL, read back as
Optuna's one-call-each writes read; refused whole by a closed trial; retried like every call."""

from __future__ import annotations

import math
import sqlite3

import optuna
import pytest
import sqlalchemy
from optuna.distributions import FloatDistribution
from optuna.storages import InMemoryStorage
from optuna.storages._rdb import models
from optuna.study import StudyDirection
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.config.target import Target
from study.ledger import Ledger, open_storage
from study.ledger import batch as batch_module
from study.ledger.batch import TrialWrites, rdb_of, write
from study.ledger.retry import CLAIM_TOKEN, RetryingStorage
from study.results import TrialState
from tests.fakes import finished_trial, rising_curve
from tests.ledger.test_retry import Flaky, dropped, retrying

STRATUM = Stratum(32, "default")


class Commits:
    """Transactions committed on PostgreSQL engines while it listens."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, connection: sqlalchemy.Connection) -> None:
        if connection.engine.url.get_backend_name() == "postgresql":
            self.count += 1

    def __enter__(self) -> Commits:
        sqlalchemy.event.listen(sqlalchemy.Engine, "commit", self)
        return self

    def __exit__(self, *exc: object) -> None:
        sqlalchemy.event.remove(sqlalchemy.Engine, "commit", self)


def writes_of(trial_id: int) -> TrialWrites:
    dist = FloatDistribution(1e-3, 1.0, log=True)
    return TrialWrites(
        trial_id,
        user={"status": "reached", "curve_points": [1, 2, 3], "note": None},
        system={"study:curve": "[]"},
        params={"learning_rate": (0.05, dist)},
        intermediate={10: 0.4, 20: -0.1, 30: math.inf},
        state=OptunaState.COMPLETE,
        values=[30.0],
    )


def stored(storage: optuna.storages.BaseStorage, trial_id: int) -> tuple:
    t = storage.get_trial(trial_id)
    return (
        t.state, t.values, t.params, t.distributions, t.user_attrs,
        {k: v for k, v in t.system_attrs.items() if k != CLAIM_TOKEN}, t.intermediate_values,
    )  # fmt: skip


def test_a_group_is_one_transaction_and_reads_as_one_call_each(postgres_url: str) -> None:
    storage = open_storage(postgres_url)
    assert rdb_of(storage) is not None
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    grouped, each = storage.create_new_trial(study_id), storage.create_new_trial(study_id)
    with Commits() as commits:
        write(storage, writes_of(grouped))
    assert commits.count == 1
    batch_module._one_call_each(storage, writes_of(each))
    assert stored(storage, grouped) == stored(storage, each)
    assert storage.get_trial(grouped).datetime_complete is not None


def test_a_closed_trial_refuses_the_whole_group(postgres_url: str) -> None:
    storage = open_storage(postgres_url)
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    trial_id = storage.create_new_trial(study_id)
    storage.set_trial_state_values(trial_id, OptunaState.FAIL)  # e.g. recovered elsewhere
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        write(storage, writes_of(trial_id))
    frozen = storage.get_trial(trial_id)
    assert frozen.state is OptunaState.FAIL
    assert not frozen.user_attrs and not frozen.params and not frozen.intermediate_values


def answers_lost_once(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[RetryingStorage, int, list[str], list[int]]:
    """A retrying storage on a new database whose next group of writes commits and then loses
    its answer (a dropped connection): the storage, an open trial, what the retry said, and a
    list that is empty once the answer was lost."""
    storage, _clock, said = retrying(open_storage(postgres_url).inner)
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    trial_id = storage.create_new_trial(study_id)
    original, lost = batch_module._in_one_transaction, [1]

    def answer_lost(rdb, writes):
        original(rdb, writes)
        if lost:
            lost.pop()
            raise dropped()

    monkeypatch.setattr(batch_module, "_in_one_transaction", answer_lost)
    return storage, trial_id, said, lost


def test_a_group_whose_commit_landed_is_not_done_twice(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, trial_id, said, _ = answers_lost_once(postgres_url, monkeypatch)
    write(storage, writes_of(trial_id))
    assert storage.get_trial(trial_id).state is OptunaState.COMPLETE
    assert len(said) == 2  # the outage and the storage back


def test_a_group_that_leaves_the_trial_open_is_written_again_after_a_landed_commit(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trial's start (its parameters and attributes, still running) whose commit landed and
    whose answer was lost: the retry sets the same rows again instead of inserting a second
    parameter row (PostgreSQL's unique key would refuse it: found by the storage outage test)."""
    storage, trial_id, said, lost = answers_lost_once(postgres_url, monkeypatch)
    opened = writes_of(trial_id)
    opened.state = opened.values = None
    write(storage, opened)
    frozen = storage.get_trial(trial_id)
    assert frozen.state is OptunaState.RUNNING and not lost and len(said) == 2
    assert frozen.params == {"learning_rate": 0.05} and frozen.user_attrs["status"] == "reached"
    write(storage, writes_of(trial_id))  # and it closes as usual
    assert stored(storage, trial_id)[:3] == (OptunaState.COMPLETE, [30.0], {"learning_rate": 0.05})


def test_a_group_cut_off_before_its_commit_is_written_on_retry(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, _clock, _said = retrying(open_storage(postgres_url).inner)
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    trial_id = storage.create_new_trial(study_id)
    original, cut = batch_module._in_one_transaction, [1, 1]

    def cut_off(rdb, writes):
        if cut:
            cut.pop()
            raise dropped()
        original(rdb, writes)

    monkeypatch.setattr(batch_module, "_in_one_transaction", cut_off)
    write(storage, writes_of(trial_id))
    assert storage.get_trial(trial_id).user_attrs["status"] == "reached"


def test_other_storages_get_one_call_each() -> None:
    storage = InMemoryStorage()
    study_id = storage.create_new_study([StudyDirection.MINIMIZE], "s")
    trial_id = storage.create_new_trial(study_id)
    assert rdb_of(storage) is None
    write(storage, writes_of(trial_id))
    assert storage.get_trial(trial_id).intermediate_values == {10: 0.4, 20: -0.1, 30: math.inf}


def test_a_claim_whose_creation_landed_is_found_not_made_twice() -> None:
    inner = Flaky("create_new_trial", fail=1, land=True)
    storage, _clock, _said = retrying(inner)
    ledger = Ledger(storage, "s")
    slot = ledger.claim(STRATUM, 3, grace=60.0)
    assert slot is not None
    study_id = storage.get_study_id_from_name(f"s/{STRATUM}")
    assert [t.number for t in storage.get_all_trials(study_id)] == [slot.number] == [0]
    assert isinstance(storage, RetryingStorage)


class Twice(InMemoryStorage):
    """A storage whose trial creation lands twice from one template, as Optuna's database
    storage does when it retries a creation whose commit landed but whose answer was lost
    (its own retry, inside `create_new_trial`, before `RetryingStorage` sees anything)."""

    def create_new_trial(self, study_id, template_trial=None):
        super().create_new_trial(study_id, template_trial)
        return super().create_new_trial(study_id, template_trial)


def test_a_claim_created_twice_keeps_one_trial_and_discards_its_twin() -> None:
    ledger = Ledger(Twice(), "s")
    slot = ledger.claim(STRATUM, 2, grace=60.0)
    assert slot is not None and slot.number == 1  # the trial the storage answered with
    study_id = ledger.storage.get_study_id_from_name(f"s/{STRATUM}")
    twin, kept = ledger.storage.get_all_trials(study_id)
    assert twin.system_attrs[CLAIM_TOKEN] == kept.system_attrs[CLAIM_TOKEN]
    assert (twin.state, twin.user_attrs["status"]) == (OptunaState.FAIL, "discarded")
    assert kept.state is OptunaState.RUNNING
    # The twin takes none of the budget and is no open trial anyone waits on.
    assert [t.number for t in ledger.liveness.running([STRATUM])] == [1]
    assert ledger.claim(STRATUM, 2, grace=60.0) is not None
    assert ledger.claim(STRATUM, 2, grace=60.0) is None


def test_a_landed_creation_whose_answer_was_lost_is_found_not_made_twice(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a real database storage: the commit that creates a claim's trial lands but its
    answer is lost (the driver raises after committing). The storage does not try again itself
    (`study.ledger.tokens.LedgerRDB`; Optuna's own made a twin), and the retry finds the trial
    by its token: one trial, the claim's."""
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", "s")
    ledger.access.study(STRATUM)  # the stratum's study exists
    armed = {"creates": False, "lost": 0}
    commit = sqlalchemy.engine.default.DefaultDialect.do_commit

    def creating(session, _context) -> None:  # a flush that inserts a trial row
        if any(isinstance(row, models.TrialModel) for row in session.new):
            armed["creates"] = True

    def lost_answer(dialect, connection) -> None:
        commit(dialect, connection)
        if armed["creates"] and armed["lost"] == 0:
            armed["lost"] += 1
            raise sqlite3.OperationalError("disk I/O error (the answer to COMMIT was lost)")

    monkeypatch.setattr(sqlalchemy.engine.default.DefaultDialect, "do_commit", lost_answer)
    sqlalchemy.event.listen(sqlalchemy.orm.Session, "after_flush", creating)
    try:
        slot = ledger.claim(STRATUM, 3, grace=60.0)
    finally:
        sqlalchemy.event.remove(sqlalchemy.orm.Session, "after_flush", creating)
    assert slot is not None and armed["lost"] == 1
    trials = ledger.storage.get_all_trials(ledger.storage.get_study_id_from_name(f"s/{STRATUM}"))
    assert [(t.number, t.state) for t in trials] == [(0, OptunaState.RUNNING)]
    assert slot.number == 0 and trials[0].user_attrs["status"] == "running"
    assert [t.number for t in ledger.liveness.running([STRATUM])] == [0]


def test_a_trial_claimed_started_and_finished_costs_a_few_transactions(postgres_url: str) -> None:
    ledger = Ledger.open(postgres_url, "s")
    ledger.access.study(STRATUM)  # the stratum's study exists (set up once per stratum)
    target = Target.parse("val_accuracy>=0.9")
    with Commits() as commits:
        slot = ledger.claim(STRATUM, 5, grace=60.0)  # creation, the budget read
        assert slot is not None
        ledger.start(slot, tuner="optuna", origin="sampler")
        curve = rising_curve(32, needed=120)
        result = finished_trial(STRATUM, slot.number, 0.05, curve, target).result
        assert result is not None and result.state is TrialState.REACHED
        done = ledger.finish(slot, result, float(result.steps_run), target=target)
    assert commits.count == 4
    again = Ledger.open(postgres_url, "s").trial(STRATUM, slot.number)
    assert again == done
    frozen = ledger.storage.get_trial(ledger.access.slot_id(slot))
    assert frozen.state is OptunaState.COMPLETE and frozen.value == result.steps_run
    assert frozen.intermediate_values  # what optuna-dashboard plots
