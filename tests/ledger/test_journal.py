"""The journal ledger under the faults a file meets: a torn last record is set aside before
the next append (not joined to it), a write on a full disk is undone (`StoreFull`), a damaged
record is named with how to keep the records before it (`StoreDamaged`). Ledgers are written
through the ledger API; the faults are made on the file, as a crash or a disk would."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.errors import StoreDamaged, StoreFull
from study.ledger import Ledger, StudyRecord
from study.ledger import journal as journal_module
from tests.fakes import TINY, write_tiny_ledger

B8 = Stratum(8, "default")


def trials_of(path: Path) -> dict[str, list[tuple[int, str]]]:
    """Every stratum's trials (number, status) in the journal at ``path``."""
    ledger = Ledger.open(str(path), TINY)
    return {str(s): [(t.number, t.status.value) for t in ledger.trials(s)] for s in ledger.strata()}


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "optuna.journal"
    write_tiny_ledger(path)
    return path


TORN = {
    # A write cut short: no newline at the end.
    "cut short": b'{"op_code": 6, "worker_id": "w", "trial_id": 3, "user_attr": {"stat',
    # Its last bytes zeroed (a crash before the file's blocks reached the disk), newline kept.
    "zeroed": b'{"op_code": 6, "worker_id": "w", "trial_id": 3, "st\x00\x00\x00\x00\n',
}


@pytest.mark.parametrize("torn", TORN.values(), ids=TORN)
def test_a_torn_record_is_set_aside_before_the_next_append(
    journal: Path, torn: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    finished = trials_of(journal)
    whole = journal.read_bytes()
    journal.write_bytes(whole + torn)
    assert trials_of(journal) == finished  # readers skip the torn record
    torn = torn.rstrip(b"\n")

    ledger = Ledger.open(str(journal), TINY)
    ledger.set_trials_total(19)  # the next append
    assert journal.read_bytes().startswith(whole)
    assert journal.read_bytes().endswith(b"\n")
    assert (journal.parent / "optuna.journal.torn").read_bytes() == torn + b"\n"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"optuna.journal ended in a torn record ({len(torn)} bytes" in err[0]
    assert "optuna.journal.torn" in err[0]
    assert trials_of(journal) == finished  # and the journal stays readable
    assert Ledger.open(str(journal), TINY).require().trials_total == 19


def test_a_damaged_record_names_its_line_and_how_to_keep_those_before(journal: Path) -> None:
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[9] = b'{"op_code": 4, "worker_id": \x00\x00\x00\n'
    journal.write_bytes(b"".join(lines))
    digest = hashlib.sha256(journal.read_bytes()).hexdigest()

    with pytest.raises(StoreDamaged) as raised:
        Ledger.open(str(journal), TINY).record()
    message = str(raised.value)
    assert "\n" not in message
    assert "optuna.journal is damaged: line 10 (byte" in message
    assert "the 9 records before it are intact" in message
    assert hashlib.sha256(journal.read_bytes()).hexdigest() == digest  # nothing written

    # The advice, as given: the records before the damaged one make a readable ledger.
    advice = message.split("keep those records: `")[1].split("`")[0]
    subprocess.run(advice, shell=True, check=True, cwd="/")
    assert journal.read_bytes() == b"".join(lines[:9])
    assert (journal.parent / "optuna.journal.damaged").exists()
    assert Ledger.open(str(journal), TINY).record() is not None


def test_a_full_disk_undoes_the_write_and_keeps_every_finished_trial(
    journal: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = trials_of(journal)
    before = journal.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))  # part of the record lands
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    ledger = Ledger.open(str(journal), TINY)
    monkeypatch.setattr(journal_module.os, "write", half_then_full)
    with pytest.raises(StoreFull) as raised:
        ledger.set_trials_total(19)
    monkeypatch.undo()

    assert "no space left for" in str(raised.value)
    assert "optuna.journal ([Errno 28] No space left on device)" in str(raised.value)
    assert "free space" in str(raised.value)
    assert journal.read_bytes() == before  # what landed was cut off again
    assert trials_of(journal) == finished
    Ledger.open(str(journal), TINY).set_trials_total(19)  # space freed: writes go on
    assert Ledger.open(str(journal), TINY).require().trials_total == 19


def test_each_record_is_one_json_line_as_optuna_writes_them(tmp_path: Path) -> None:
    """The backend appends what Optuna's own would: one JSON object a line."""
    path = tmp_path / "ledger.journal"
    Ledger.open(str(path), "one").create(StudyRecord("one", config_text="name: one"))
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines and all(line.endswith(b"\n") for line in lines)
    compact = [json.dumps(json.loads(line), separators=(",", ":")).encode() for line in lines]
    assert [line.rstrip(b"\n") for line in lines] == compact
    assert journal_module.damaged_line(path) is None
