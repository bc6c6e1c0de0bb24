"""`study.adapters.optuna_internals` against the installed Optuna: trial and study ids, the
cached trial list, a trial made from a frozen one, the RDB storage's session and
``_without_commit`` helpers and trial creation, the journal's lock, replay and backend, and the
gRPC proxy's stub, cache and servicer, each doing what the ledger relies on."""

from __future__ import annotations

import socket
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.study import StudyDirection
from optuna.trial import TrialState

from study.adapters.optuna_internals import (
    DEFAULT_STUDY_NAME_PREFIX,
    METRIC_NAMES_KEY,
    RDB_LOGGER,
    BaseHeartbeat,
    CreateTrialOnce,
    FrozenStudy,
    JournalOperation,
    add_storage_servicer,
    append_to_trial,
    cache_backend,
    forget_cached_trials,
    grpc_stub_and_cache,
    id_of_study,
    id_of_trial,
    journal_usable,
    rdb_models,
    rdb_session,
    running_template,
    set_attr_in,
    set_intermediate_in,
    set_param_in,
    set_value_in,
    trial_id_or_none,
    trial_of,
)

MIN = [StudyDirection.MINIMIZE]


class _OnceRDB(CreateTrialOnce, RDBStorage):
    pass


def _rdb(tmp_path: Path) -> _OnceRDB:
    return _OnceRDB(f"sqlite:///{tmp_path / 'optuna.db'}")


def test_ids_names_and_public_faces() -> None:
    storage = InMemoryStorage()
    study = optuna.create_study(storage=storage)
    assert study.study_name.startswith(DEFAULT_STUDY_NAME_PREFIX)
    assert id_of_study(study) == storage.get_study_id_from_name(study.study_name)
    trial = study.ask()
    frozen = study.trials[0]
    stored = storage.get_trial_id_from_study_id_trial_number(id_of_study(study), 0)
    assert id_of_trial(frozen) == id_of_trial(trial) == trial_id_or_none(trial) == stored
    assert trial_id_or_none(object()) is None
    assert all(isinstance(s, FrozenStudy) for s in storage.get_all_studies())
    assert issubclass(RDBStorage, BaseHeartbeat)
    assert RDBStorage.__module__ == RDB_LOGGER
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # set_metric_names is experimental
        study.set_metric_names(["steps"])
    assert storage.get_study_system_attrs(id_of_study(study))[METRIC_NAMES_KEY] == ["steps"]


def test_forgetting_the_cached_trials_clears_the_list_ask_and_tell_clear() -> None:
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    assert hasattr(study._thread_local, "cached_all_trials")
    study._thread_local.cached_all_trials = study.trials
    forget_cached_trials(study)
    assert study._thread_local.cached_all_trials is None


def test_a_trial_made_from_a_frozen_one_suggests_and_is_told(tmp_path: Path) -> None:
    storage = _rdb(tmp_path)
    study = optuna.create_study(storage=storage, sampler=optuna.samplers.TPESampler(seed=1))
    frozen = storage.get_trial(storage.create_new_trial(id_of_study(study)))
    trial = trial_of(study, frozen)
    assert isinstance(trial, optuna.Trial)
    assert trial.number == frozen.number
    x = trial.suggest_float("x", 0.0, 1.0)
    assert storage.get_trial(id_of_trial(frozen)).params == {"x": x}
    study.tell(trial, 0.5)
    assert study.trials[0].state is TrialState.COMPLETE
    assert study.trials[0].value == 0.5


def test_the_storage_behind_optunas_trial_cache(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'cached.db'}")
    assert isinstance(cache_backend(study._storage), RDBStorage)
    assert cache_backend(cache_backend(study._storage)) is None
    assert cache_backend(object()) is None


def test_a_trial_is_created_in_one_session_as_optuna_creates_it(tmp_path: Path) -> None:
    assert "_create_new_trial" in vars(RDBStorage)  # the hook `CreateTrialOnce` replaces
    storage = _rdb(tmp_path)
    study_id = storage.create_new_study(MIN, "s")
    bare = storage.create_new_trial(study_id)
    assert storage.get_trial(bare).state is TrialState.RUNNING
    template = running_template({"mark": "m"})
    template.state = TrialState.WAITING
    waiting = storage.create_new_trial(study_id, template)
    got = storage.get_trial(waiting)
    assert (got.number, got.state, got.system_attrs) == (1, TrialState.WAITING, {"mark": "m"})
    assert id_of_trial(got) == waiting


def test_rows_written_in_one_session_are_optunas_rows(tmp_path: Path) -> None:
    storage = _rdb(tmp_path)
    study_id = storage.create_new_study(MIN, "s")
    trial_id = storage.create_new_trial(study_id)
    models, dist = rdb_models(), FloatDistribution(0.0, 1.0)
    with rdb_session(storage) as session:
        trial = models.TrialModel.find_or_raise_by_id(trial_id, session, for_update=True)
        set_param_in(storage, session, trial_id, "x", 0.25, dist)
        set_attr_in(storage, session, models.TrialUserAttributeModel, trial_id, "u", 1)
        set_attr_in(storage, session, models.TrialSystemAttributeModel, trial_id, "s", [2])
        set_intermediate_in(storage, session, trial_id, 3, 0.5)
        set_value_in(storage, session, trial, 0, 0.75)
        trial.state = TrialState.COMPLETE
    got = storage.get_trial(trial_id)
    assert (got.params, got.user_attrs, got.system_attrs) == ({"x": 0.25}, {"u": 1}, {"s": [2]})
    assert (got.intermediate_values, got.value, got.state) == ({3: 0.5}, 0.75, TrialState.COMPLETE)
    other = storage.create_new_trial(study_id)
    with pytest.raises(RuntimeError), rdb_session(storage) as session:
        set_attr_in(storage, session, models.TrialUserAttributeModel, other, "u", 1)
        raise RuntimeError("rolled back")
    assert storage.get_trial(other).user_attrs == {}


def test_lines_appended_to_a_journal_are_read_back_and_a_closed_trial_refuses(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "journal.log")
    journal = JournalStorage(JournalFileBackend(path))
    assert journal_usable(journal)
    assert not journal_usable(InMemoryStorage())
    trial_id = journal.create_new_trial(journal.create_new_study(MIN, "s"))
    done = datetime.now(tz=timezone.utc).isoformat(timespec="microseconds")
    lines = [
        (JournalOperation.SET_TRIAL_USER_ATTR, {"trial_id": trial_id, "user_attr": {"u": 1}}),
        (
            JournalOperation.SET_TRIAL_STATE_VALUES,
            {"trial_id": trial_id, "state": TrialState.COMPLETE, "values": [1.0],
             "datetime_complete": done},
        ),
    ]  # fmt: skip
    append_to_trial(journal, trial_id, lines)
    for storage in (journal, JournalStorage(JournalFileBackend(path))):
        got = storage.get_trial(trial_id)
        assert (got.user_attrs, got.state, got.value) == ({"u": 1}, TrialState.COMPLETE, 1.0)
    with pytest.raises(UpdateFinishedTrialError):
        append_to_trial(journal, trial_id, lines[:1])


def test_a_servicer_added_to_a_server_answers_a_stub_and_its_cache() -> None:
    import grpc

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    storage = InMemoryStorage()
    study_id = storage.create_new_study(MIN, "served")
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    add_storage_servicer(storage, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub, cache = grpc_stub_and_cache(channel)
        assert type(cache).__name__ == "GrpcClientCache"
        proxy = optuna.storages.GrpcStorageProxy.__new__(optuna.storages.GrpcStorageProxy)
        proxy._stub, proxy._cache = stub, cache  # what `GrpcStorageProxy._setup` sets
        assert proxy.get_study_id_from_name("served") == study_id
        assert [t.number for t in proxy.get_all_trials(study_id)] == []
    finally:
        channel.close()
        server.stop(None)
