"""The study's notes kept in the ledger (``ledger.notes``): a pilot, the throughput probe's rows
and an adaptive allocation's state, each written and read back by another process, replaced
by a later write, refused for a study that is not stored, and invisible to the study record;
what older ledgers stored still reads; a round is claimed by one writer only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from study.config.space import Stratum
from study.errors import UsageError
from study.ledger import AllocationState, Decision, Ledger, Pilot, StudyRecord, ThroughputRow
from tests.fakes import PILOT

ROW = ThroughputRow(128, "mirrored:2", 2, 0.0021, samples=(0.002, 0.0021), hardware="2 x CPU")


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    ledger = reopen(tmp_path)
    ledger.create(StudyRecord("s", config_text="name: s\n", trials_total=4))
    return ledger


def reopen(tmp_path: Path, name: str = "s") -> Ledger:
    """The ledger as another process opens it."""
    return Ledger.open(str(tmp_path / "j.journal"), name)


def test_a_pilot_is_stored_replaced_and_read_back(ledger: Ledger, tmp_path: Path) -> None:
    record = ledger.record()
    assert ledger.notes.pilot() is None
    ledger.notes.set_pilot(PILOT)
    back = reopen(tmp_path).notes.pilot()
    assert back is not None and back.to_stored() == PILOT.to_stored()
    ledger.notes.set_pilot(Pilot.from_stored({**PILOT.to_stored(), "b_simple": 30.0}))
    assert reopen(tmp_path).notes.pilot().b_simple == 30.0
    assert reopen(tmp_path).record() == record  # the record does not see it


def test_throughput_rows_come_back_and_a_new_probe_replaces_them(
    ledger: Ledger, tmp_path: Path
) -> None:
    assert ledger.notes.throughput() == []
    ledger.notes.set_throughput([ROW, ThroughputRow(256, "default", 1, 0.01)])
    assert reopen(tmp_path).notes.throughput()[0] == ROW
    ledger.notes.set_throughput([ThroughputRow(128, "mirrored:2", 2, 0.5)])
    assert [r.seconds_per_step for r in reopen(tmp_path).notes.throughput()] == [0.5]
    assert reopen(tmp_path).record().trials_total == 4  # the study's record is untouched


def test_the_allocation_state_is_kept(ledger: Ledger, tmp_path: Path) -> None:
    assert ledger.notes.allocation() is None
    state = AllocationState(
        20, 1, 3, {Stratum(8, "default"): 4}, (Decision(0, "b8/default", 4, "grid"),)
    )
    ledger.notes.set_allocation(state)
    assert reopen(tmp_path).notes.allocation() == state


def test_what_an_older_ledger_stored_still_reads(ledger: Ledger) -> None:
    """Notes written as plain JSON mappings by an earlier version of the ledger."""
    study_id = ledger.storage.get_study_id_from_name("s")
    old_row = {"batch_size": 64, "strategy": "default", "replicas": 1, "seconds_per_step": 0.2}
    old_state = {"round": 0, "budgets": {"b8/default": 2}, "decisions": []}
    for key, value in (
        ("throughput_probe", [old_row]),
        ("adaptive_allocation", old_state),
        ("noise_scale_pilot", PILOT.to_stored()),
    ):
        ledger.storage.set_study_user_attr(study_id, key, json.dumps(value))
    (row,) = ledger.notes.throughput()
    assert (row.batch_size, row.seconds_per_step, row.samples) == (64, 0.2, ())
    state = ledger.notes.allocation()
    assert state is not None and state.budgets == {Stratum(8, "default"): 2}
    assert (state.total, state.rounds) == (0, 0)
    assert ledger.notes.pilot().b_simple == 25.0


def test_notes_of_a_study_not_stored_are_refused(tmp_path: Path) -> None:
    nobody = reopen(tmp_path, "nobody")
    for write in (
        lambda: nobody.notes.set_pilot(PILOT),
        lambda: nobody.notes.set_throughput([ROW]),
        lambda: nobody.notes.set_allocation(AllocationState(1, 0, 1)),
    ):
        with pytest.raises(UsageError, match="no study named 'nobody'"):
            write()
    assert nobody.notes.throughput() == [] and nobody.notes.pilot() is None
    assert nobody.record() is None  # nothing was created


def test_a_round_is_claimed_once_and_is_no_study(ledger: Ledger, tmp_path: Path) -> None:
    assert ledger.notes.claim_round(1)
    assert not reopen(tmp_path).notes.claim_round(1) and ledger.notes.claim_round(2)
    assert ledger.strata() == []  # a claim is not a stratum
    from study.ledger.storage import list_studies

    assert list_studies(ledger.storage) == ["s"]  # nor a study
    assert len(ledger.notes.round_claims()) == 2


def test_only_the_latest_round_claims_are_kept(ledger: Ledger) -> None:
    from study.ledger.study_notes import KEPT_CLAIMS

    for number in range(1, 6):
        assert ledger.notes.claim_round(number)
    names = sorted(ledger.notes.round_claims())
    assert len(names) == KEPT_CLAIMS and names[-1].endswith("/round-5")
    assert not ledger.notes.claim_round(5) and ledger.notes.claim_round(1)  # 1's was deleted
