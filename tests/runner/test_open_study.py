"""Opening a study that another process is creating at the same moment: its record is read
again until every field is stored, so the second process neither fails nor skips the code
version check."""

from __future__ import annotations

import threading
import time

import pytest

from study.config.studyfile import load_study_file
from study.errors import UsageError
from study.ledger import Ledger, StudyRecord
from study.runner.launch import RunOptions, fingerprint, open_study
from study.version import code_version
from tests.runner.conftest import tiny_study, write_study


def half_written(tmp_path, name: str, version: str):
    """A study file and a ledger whose record of it lacks its fingerprint and code version,
    as a creating process leaves it between two writes; returns (config, ledger, finish)."""
    config = load_study_file(write_study(tmp_path, tiny_study(name=name)))
    ledger = Ledger.open(str(tmp_path / "j.journal"), name)
    ledger.create(StudyRecord(name=name, config_text=config.text, created=time.time()))
    study_id = ledger.storage.get_study_id_from_name(name)

    def finish() -> None:
        time.sleep(0.5)
        ledger.storage.set_study_user_attr(study_id, "fingerprint", fingerprint(config))
        ledger.storage.set_study_user_attr(study_id, "code_version", version)

    return config, ledger, finish


def test_a_record_being_written_is_awaited(tmp_path) -> None:
    config, _, finish = half_written(tmp_path, "racing", code_version())
    writer = threading.Thread(target=finish)
    writer.start()
    _, record = open_study(config, RunOptions(storage=str(tmp_path / "j.journal")))
    writer.join()
    assert (record.fingerprint, record.code_version) == (fingerprint(config), code_version())


def test_the_code_version_written_last_is_still_checked(tmp_path) -> None:
    config, _, finish = half_written(tmp_path, "racing", "0.0.1+0000000000")
    writer = threading.Thread(target=finish)
    writer.start()
    with pytest.raises(UsageError, match=r"created by study 0\.0\.1\+0000000000"):
        open_study(config, RunOptions(storage=str(tmp_path / "j.journal")))
    writer.join()
