"""Optuna's private names `study.ledger` uses: trial and study ids, a claimed trial, the RDB
storage's session and ``_without_commit`` helpers, the journal storage's lock and replay, and
the gRPC proxy's generated stub, client cache and servicer.

Checked at Optuna 4.9.0 (the oldest ``pyproject.toml`` allows) and 5.1.0; the contract test is
``tests/adapters/test_optuna_internals.py``. Each function says what it reaches and what
happens if it moved: almost always an AttributeError or ImportError naming it, which the
contract test catches first.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import ModuleType
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages._base import DEFAULT_STUDY_NAME_PREFIX
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.storages.journal._storage import JournalOperation
from optuna.study._frozen import FrozenStudy
from optuna.study.study import _SYSTEM_ATTR_METRIC_NAMES
from optuna.trial import FrozenTrial
from optuna.trial import TrialState as OptunaState

__all__ = [
    "DEFAULT_STUDY_NAME_PREFIX",
    "METRIC_NAMES_KEY",
    "RDB_LOGGER",
    "BaseHeartbeat",
    "CreateTrialOnce",
    "FrozenStudy",
    "JournalOperation",
    "add_storage_servicer",
    "append_to_trial",
    "cache_backend",
    "forget_cached_trials",
    "grpc_stub_and_cache",
    "id_of_study",
    "id_of_trial",
    "journal_usable",
    "rdb_models",
    "rdb_session",
    "running_template",
    "set_attr_in",
    "set_intermediate_in",
    "set_param_in",
    "set_value_in",
    "trial_id_or_none",
    "trial_of",
]

#: The study system attribute `Study.set_metric_names` writes
#: (``optuna.study.study._SYSTEM_ATTR_METRIC_NAMES``; an ImportError if it moved).
METRIC_NAMES_KEY: str = _SYSTEM_ATTR_METRIC_NAMES
#: The logger of Optuna's RDB storage (module ``optuna.storages._rdb.storage``): were it
#: renamed, a filter added to this name would drop nothing (its warnings show again).
RDB_LOGGER = "optuna.storages._rdb.storage"


# -- ids and studies ----------------------------------------------------------------------------
def id_of_trial(trial: FrozenTrial | optuna.Trial) -> int:
    """The storage id of a trial (``FrozenTrial._trial_id``/``Trial._trial_id``, which
    Optuna's storages take; no public reader exists)."""
    return trial._trial_id


def trial_id_or_none(trial: Any) -> int | None:
    """The storage id of ``trial`` if it is an Optuna trial that keeps one, else None
    (``_trial_id``; should it move, every trial reads None and callers look the id up)."""
    return getattr(trial, "_trial_id", None)


def id_of_study(study: optuna.Study) -> int:
    """The storage id of a loaded study (``Study._study_id``)."""
    return study._study_id


def forget_cached_trials(study: optuna.Study) -> None:
    """Drop a study's cached trial list (``Study._thread_local.cached_all_trials = None``), as
    `Study.ask` and `Study.tell` do, so its sampler reads the trials afresh. Should it move,
    this sets an attribute nothing reads and samplers may see a list one trial old."""
    study._thread_local.cached_all_trials = None


def cache_backend(storage: Any) -> Any | None:
    """The storage behind Optuna's trial cache (``_CachedStorage._backend``, the wrapper
    `optuna.Study` puts around an RDB storage), or None for any other object. Should it move,
    None: the ledger then writes one call each instead of one transaction."""
    return getattr(storage, "__dict__", {}).get("_backend")


class _ClaimedTrial(optuna.Trial):
    """`optuna.Trial` made from a frozen trial already read: what its ``__init__`` and
    ``_init_relative_params`` set (``_trial_id``, ``_cached_frozen_trial``,
    ``relative_search_space``, ``_relative_params``, ``_fixed_params``), without reading the
    trial once more."""

    def __init__(self, study: optuna.Study, frozen: FrozenTrial) -> None:
        self.study = study
        self._trial_id = frozen._trial_id
        self.storage = study._storage
        self._cached_frozen_trial = frozen
        study.sampler.before_trial(study, frozen)
        self.relative_search_space = None
        self._relative_params = None
        self._fixed_params = frozen.system_attrs.get("fixed_params", {})


def trial_of(study: optuna.Study, frozen: FrozenTrial) -> optuna.Trial:
    """The `optuna.Trial` of ``frozen`` in ``study``, after the study's sampler's
    ``before_trial`` (as `Study.ask` makes it), from ``frozen`` without reading it again.
    Uses ``Study._storage`` and the private fields of `optuna.Trial` named in `_ClaimedTrial`;
    should Optuna add one, suggesting on the trial raises an AttributeError naming it."""
    return _ClaimedTrial(study, frozen)


# -- the RDB storage ----------------------------------------------------------------------------
def rdb_models() -> ModuleType:
    """Optuna's SQLAlchemy models (``optuna.storages._rdb.models``: ``StudyModel``,
    ``TrialModel``, ``Trial*AttributeModel``, ...), the rows its methods write."""
    from optuna.storages._rdb import models

    return models


@contextmanager
def rdb_session(rdb: Any, ignore_integrity_error: bool = False) -> Iterator[Any]:
    """A session of ``rdb`` that commits on leaving (rolls back on an error), as Optuna's own
    methods open one (``optuna.storages._rdb.storage._create_scoped_session``)."""
    from optuna.storages._rdb.storage import _create_scoped_session

    with _create_scoped_session(rdb.scoped_session, ignore_integrity_error) as session:
        yield session


def set_param_in(
    rdb: Any, session: Any, trial_id: int, name: str, internal: float, dist: Any
) -> None:
    """Add a parameter row in ``session`` (``RDBStorage._set_trial_param_without_commit``)."""
    rdb._set_trial_param_without_commit(session, trial_id, name, internal, dist)


def set_attr_in(rdb: Any, session: Any, model: type, trial_id: int, key: str, value: Any) -> None:
    """Set a user or system attribute row (``model``) in ``session``
    (``RDBStorage._set_trial_attr_without_commit``)."""
    rdb._set_trial_attr_without_commit(session, model, trial_id, key, value)


def set_intermediate_in(rdb: Any, session: Any, trial_id: int, step: int, value: float) -> None:
    """Set an intermediate value row in ``session``
    (``RDBStorage._set_trial_intermediate_value_without_commit``)."""
    rdb._set_trial_intermediate_value_without_commit(session, trial_id, step, value)


def set_value_in(rdb: Any, session: Any, trial: Any, objective: int, value: float) -> None:
    """Set an objective's value row of ``trial`` (a ``TrialModel``) in ``session``
    (``RDBStorage._set_trial_value_without_commit``)."""
    rdb._set_trial_value_without_commit(session, trial, objective, value)


def running_template(system_attrs: dict[str, Any]) -> FrozenTrial:
    """The trial Optuna creates when given no template: running, started now, empty."""
    return FrozenTrial(
        number=-1,
        state=OptunaState.RUNNING,
        value=None,
        values=None,
        datetime_start=datetime.now(),
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs=system_attrs,
        intermediate_values={},
        trial_id=-1,
    )


class CreateTrialOnce:
    """Mixin for `optuna.storages.RDBStorage`: its ``_create_new_trial`` (what the public
    ``create_new_trial`` calls, and retries by itself on a lost commit) made in one session
    with ``_get_prepared_new_trial``, with no retry of its own. Should Optuna rename
    ``_create_new_trial``, its own (retrying) creation runs again; should it rename
    ``_get_prepared_new_trial``, creating a trial raises an AttributeError naming it."""

    def _create_new_trial(
        self, study_id: int, template_trial: FrozenTrial | None = None
    ) -> FrozenTrial:
        models = rdb_models()
        with rdb_session(self) as session:
            models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
            trial = self._get_prepared_new_trial(study_id, template_trial, session)  # type: ignore[attr-defined]
            if template_trial is None:
                template_trial = running_template({})
                template_trial.state = trial.state
            frozen = copy.deepcopy(template_trial)
            frozen.number = trial.number
            frozen.datetime_start = trial.datetime_start
            frozen._trial_id = trial.trial_id
            return frozen


# -- the journal storage ------------------------------------------------------------------------
_JOURNAL_NEEDS = ("_thread_lock", "_backend", "_replay_result", "_sync_with_backend")


def journal_usable(journal: Any) -> bool:
    """Whether a `JournalStorage` has what `append_to_trial` uses (``_thread_lock``,
    ``_backend``, ``_replay_result``, ``_sync_with_backend``); if not, the ledger writes one
    call each."""
    return all(hasattr(journal, n) for n in _JOURNAL_NEEDS)


def append_to_trial(
    journal: Any, trial: int, lines: Sequence[tuple[JournalOperation, dict[str, Any]]]
) -> None:
    """Append ``lines`` (log lines of the trial ``trial``) to ``journal`` in one append, under
    its lock, after reading it up to its end, then read them back as each call would.

    Uses ``JournalStorage._thread_lock``, ``_sync_with_backend``, ``_replay_result`` (its
    ``_trials`` and ``worker_id``) and ``_backend.append_logs``.

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial is closed already (nothing
            written), or another process closed it in between (raised once all is read).
    """
    with journal._thread_lock:
        journal._sync_with_backend()
        found = journal._replay_result._trials.get(trial)
        if found is not None and found.state.is_finished():
            raise UpdateFinishedTrialError(
                f"Trial#{found.number} has already finished and can not be updated."
            )
        worker = journal._replay_result.worker_id
        journal._backend.append_logs([{"op_code": op, "worker_id": worker, **f} for op, f in lines])
        _read_back(journal)


def _read_back(journal: Any) -> None:
    """Read the journal up to its end; the first refusal of this worker's lines (another
    process closed the trial in between) is raised once every line is read."""
    refused: UpdateFinishedTrialError | None = None
    while True:
        try:
            journal._sync_with_backend()
        except UpdateFinishedTrialError as exc:  # the line is counted read: go on past it
            refused = refused or exc
            continue
        break
    if refused is not None:
        raise refused


# -- the gRPC proxy -----------------------------------------------------------------------------
def grpc_stub_and_cache(channel: Any) -> tuple[Any, Any]:
    """The storage service's stub on ``channel`` and a trial cache over it, as
    `GrpcStorageProxy._setup` makes them (``optuna.storages._grpc.auto_generated.api_pb2_grpc``
    ``.StorageServiceStub`` and ``optuna.storages._grpc.client.GrpcClientCache``)."""
    from optuna.storages._grpc.auto_generated import api_pb2_grpc
    from optuna.storages._grpc.client import GrpcClientCache

    stub = api_pb2_grpc.StorageServiceStub(channel)
    return stub, GrpcClientCache(stub)


def add_storage_servicer(storage: Any, server: Any) -> None:
    """Serve ``storage`` on the gRPC ``server`` as ``optuna.storages.run_grpc_proxy_server``
    does (``optuna.storages._grpc.servicer.OptunaStorageProxyService`` added with the
    generated ``api_pb2_grpc.add_StorageServiceServicer_to_server``)."""
    from optuna.storages._grpc.auto_generated import api_pb2_grpc
    from optuna.storages._grpc.servicer import OptunaStorageProxyService

    api_pb2_grpc.add_StorageServiceServicer_to_server(OptunaStorageProxyService(storage), server)
