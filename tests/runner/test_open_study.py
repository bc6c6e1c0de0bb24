"""Opening a study that another process is creating at the same moment: its record is read
again until every field is stored, so the second process neither fails nor skips the code
version check."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from study.config.study import StudyConfig
from study.config.studyfile import load_study_file
from study.errors import UsageError
from study.ledger import Ledger, StudyRecord
from study.runner import launch
from study.runner.launch import RunOptions, fingerprint, open_study
from study.version import code_version
from tests.runner.conftest import tiny_study, write_study


def half_written(
    tmp_path, name: str, version: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[StudyConfig, list[float]]:
    """A study file and a ledger whose record of it lacks its fingerprint and code version,
    as a creating process leaves it between two writes. The creator stores both while the
    opening process waits to read the record again (during its first sleep, on a fake clock).
    Returns the config and the sleeps asked for."""
    config = load_study_file(write_study(tmp_path, tiny_study(name=name)))
    ledger = Ledger.open(str(tmp_path / "j.journal"), name)
    ledger.create(StudyRecord(name=name, config_text=config.text, created=time.time()))
    study_id = ledger.storage.get_study_id_from_name(name)
    sleeps: list[float] = []

    def finish_while_waiting(seconds: float) -> None:
        if not sleeps:
            ledger.storage.set_study_user_attr(study_id, "fingerprint", fingerprint(config))
            ledger.storage.set_study_user_attr(study_id, "code_version", version)
        sleeps.append(seconds)

    clock = SimpleNamespace(time=time.time, monotonic=time.monotonic, sleep=finish_while_waiting)
    monkeypatch.setattr(launch, "time", clock)
    return config, sleeps


def test_a_record_being_written_is_awaited(tmp_path, monkeypatch) -> None:
    config, sleeps = half_written(tmp_path, "racing", code_version(), monkeypatch)
    _, record = open_study(config, RunOptions(storage=str(tmp_path / "j.journal")))
    assert len(sleeps) == 1  # read half written, then again once written
    assert (record.fingerprint, record.code_version) == (fingerprint(config), code_version())


def test_the_code_version_written_last_is_still_checked(tmp_path, monkeypatch) -> None:
    config, sleeps = half_written(tmp_path, "racing", "0.0.1+0000000000", monkeypatch)
    with pytest.raises(UsageError, match=r"created by study 0\.0\.1\+0000000000"):
        open_study(config, RunOptions(storage=str(tmp_path / "j.journal")))
    assert len(sleeps) == 1


def test_a_new_study_records_the_slack_its_trials_are_pruned_with(tmp_path) -> None:
    data = tiny_study(name="slack")
    data["tuner"] = {**data.get("tuner", {}), "prune_slack": 1.25}
    config = load_study_file(write_study(tmp_path, data))
    _, record = open_study(config, RunOptions(storage=str(tmp_path / "j.journal")))
    assert record.prune_slack == 1.25 and record.pruned_at == 1.25
    stored = Ledger.open(str(tmp_path / "j.journal"), "slack", create=False).record()
    assert stored is not None and stored.prune_slack == 1.25


class _Lineup:
    """A tuner lineup that records its warm-up and its close."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def warm(self) -> None:
        self.calls.append("warm")

    def close(self) -> None:
        self.calls.append("close")


def test_a_set_up_that_fails_closes_the_warmed_lineup(tmp_path, monkeypatch) -> None:
    """The oracle process a run's warm-up starts ends with a set-up that fails (a damaged
    MLflow store here): left to the interpreter's exit, it could outlive the run."""
    config = load_study_file(write_study(tmp_path, tiny_study(name="damaged")))
    lineup = _Lineup()
    monkeypatch.setattr(launch, "build_lineup", lambda *args, **kwargs: lineup)

    def damaged(uri: str, name: str) -> None:
        raise UsageError("MLflow store mlruns/mlflow.db is damaged")

    monkeypatch.setattr(launch, "StudyTracker", damaged)
    options = RunOptions(storage=str(tmp_path / "j.journal"))
    with pytest.raises(UsageError, match="is damaged"):
        launch._run(config, options, str(tmp_path / "mlruns"), pool=None)  # type: ignore[arg-type]
    assert lineup.calls == ["warm", "close"]
