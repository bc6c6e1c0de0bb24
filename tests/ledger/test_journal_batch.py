"""A group of writes appended to a journal file at once gives the trial Optuna's one call each
gives it, in one append; a trial closed already refuses the group and later reads go on."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState as OptunaState

from study.ledger.batch import TrialWrites, _one_call_each
from study.ledger.journal_batch import append_group, journal_of


def _storage(path: Path) -> tuple[JournalStorage, int]:
    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.create_study(storage=storage, study_name="s")
    return storage, study.ask()._trial_id


def _writes(trial_id: int) -> TrialWrites:
    return TrialWrites(
        trial_id,
        user={"status": "reached", "curve_steps": [1, 2, 3]},
        system={"curve": '[{"step": 1}]'},
        params={"learning_rate": (0.01, FloatDistribution(1e-3, 1.0, log=True))},
        intermediate={step: 1.0 / step for step in range(1, 41)},
        state=OptunaState.COMPLETE,
        values=[40.0],
    )


def test_a_group_is_one_append_and_reads_as_one_call_each(tmp_path: Path) -> None:
    ours, mine = _storage(tmp_path / "ours.journal")
    theirs, their = _storage(tmp_path / "theirs.journal")
    assert journal_of(ours) is ours
    appends: list[int] = []
    append = ours._backend.append_logs
    ours._backend.append_logs = lambda logs: (appends.append(len(logs)), append(logs))[1]
    assert append_group(ours, _writes(mine))
    _one_call_each(theirs, _writes(their))
    assert appends == [1 + 2 + 1 + 40 + 1]
    a, b = ours.get_trial(mine), theirs.get_trial(their)
    for field in ("state", "values", "params", "user_attrs", "system_attrs"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.intermediate_values == b.intermediate_values
    reread = JournalStorage(JournalFileBackend(str(tmp_path / "ours.journal")))
    assert reread.get_trial(mine).intermediate_values == a.intermediate_values
    with pytest.raises(UpdateFinishedTrialError):
        append_group(ours, TrialWrites(mine, user={"late": 1}))
    assert ours.get_trial(mine).user_attrs == a.user_attrs  # later reads go on
    assert not append_group(ours, TrialWrites(mine, state=OptunaState.RUNNING))  # Optuna's
