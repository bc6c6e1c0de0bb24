"""Liveness: a running trial carries its owner's last heartbeat; a trial whose owner is on
another host and missed its grace is closed as interrupted, on a journal and on an RDB
(SQLite) storage alike. Hosts are told apart by ``$STUDY_HOST``; time is a fake clock shared by
both hosts' ledgers, moved by hand, so no test waits on the wall clock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.ledger import Ledger, StudyRecord
from study.ledger.clock import SYSTEM_CLOCK
from study.ledger.liveness import SETUP_GRACE_S
from study.ledger.owners import HOST_ENV, Beat, host_name, owner_alive, owner_id
from study.results import TrialState
from tests.fakes import FakeClock

S32 = Stratum(32, "default")
#: The grace a worker promises between two beats (any value: the clock is fake).
GRACE = 60.0


@pytest.fixture(params=["journal", "sqlite"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "journal":
        return str(tmp_path / "ledger.journal")
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def ledger_as(url: str, host: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The ledger of study ``s`` as a process on ``host`` opens it, reading ``clock``."""
    monkeypatch.setenv(HOST_ENV, host)
    ledger = Ledger.open(url, "s", clock=clock)
    ledger.create(StudyRecord("s", config_text="name: s", trials_total=2))
    return ledger


def test_a_beat_is_stale_only_after_its_grace() -> None:
    beat = Beat(at=100.0, grace=60.0)
    assert not beat.stale(now=160.0)
    assert beat.stale(now=160.001)
    assert Beat.from_stored(beat.to_stored()) == beat
    assert Beat.from_stored(None) is None
    assert Beat.from_stored({"at": "soon"}) is None


def test_the_ledger_reads_the_wall_clock_unless_given_another(tmp_path: Path) -> None:
    assert Ledger.open(str(tmp_path / "j.journal"), "s").clock is SYSTEM_CLOCK
    clock = FakeClock(start=5.0)
    assert Ledger.open(str(tmp_path / "j.journal"), "s", clock=clock).clock.now() == 5.0


def test_owners_on_other_hosts_are_judged_by_their_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(HOST_ENV, "here")
    assert host_name() == "here"
    me = owner_id()
    assert me.startswith(f"here:{os.getpid()}:")
    now = 1_000_000.0
    assert owner_alive(me, Beat(now - 3600, 1.0), now)  # on its own host the process decides
    assert not owner_alive("here:999999999:0", Beat(now, 60.0), now)  # no such process here
    elsewhere = f"there:{os.getpid()}:0"
    assert owner_alive(elsewhere, Beat(now - 3, 3.0), now)
    assert not owner_alive(elsewhere, Beat(now - 3.001, 3.0), now)
    assert owner_alive(elsewhere)  # no heartbeat at all (an older ledger): assumed alive
    assert not owner_alive(None)


def test_a_dead_hosts_trial_is_recovered_after_the_grace(
    storage_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    worker = ledger_as(storage_url, "host-a", clock, monkeypatch)
    slot = worker.claim(S32, budget=2, grace=GRACE)
    assert slot is not None
    assert worker.liveness.beat(slot, GRACE)

    other = ledger_as(storage_url, "host-b", clock, monkeypatch)
    (running,) = other.liveness.running([S32])
    assert running.owner == slot.owner and running.owner.startswith("host-a:")
    assert other.liveness.alive(running)
    assert other.liveness.recover_stale([S32]) == []  # fresh: left alone
    assert other.summary().strata[0].running == 1

    clock.advance(GRACE)  # host-a stops beating: at the grace its trial is still alive
    assert other.liveness.alive(running) and other.liveness.recover_stale([S32]) == []
    clock.advance(0.001)  # and past it, stale
    assert not other.liveness.alive(running)
    assert other.summary().strata[0].running == 0
    (recovered,) = other.liveness.recover_stale([S32])
    assert recovered.number == slot.number
    after = other.trials(S32)[slot.number]
    assert (after.status, after.open) == (TrialState.INTERRUPTED, False)
    assert (
        other.storage.get_trial(other.access.trial_id(S32, slot.number)).state is OptunaState.FAIL
    )
    assert other.liveness.running([S32]) == [] and other.liveness.recover_stale([S32]) == []
    assert other.remaining(S32, 2) == 2  # its slot runs again

    monkeypatch.setenv(HOST_ENV, "host-a")
    assert not worker.liveness.beat(slot, GRACE)  # the late owner learns its trial was taken


def test_beats_keep_a_long_trial_alive(storage_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    worker = ledger_as(storage_url, "host-a", clock, monkeypatch)
    slot = worker.claim(S32, budget=2, grace=GRACE)
    assert slot is not None
    other = ledger_as(storage_url, "host-b", clock, monkeypatch)
    for _ in range(8):  # four graces in all, stamped every half of one
        clock.advance(GRACE / 2)
        assert worker.liveness.beat(slot, GRACE)
        assert other.liveness.recover_stale([S32]) == []
    assert other.liveness.alive(other.liveness.running([S32])[0])
    clock.advance(GRACE + 1)  # the beats stop
    assert [t.number for t in other.liveness.recover_stale([S32])] == [slot.number]


def test_a_trial_being_set_up_is_left_alone_for_the_setup_grace(
    storage_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    ledger = ledger_as(storage_url, "host-a", clock, monkeypatch)
    trial = ledger.access.study(S32).ask()  # open, with no owner yet (a claim in progress)
    assert ledger.liveness.recover_stale([S32]) == []
    clock.advance(SETUP_GRACE_S + 10)  # past it (the trial's start is Optuna's wall time)
    assert [t.number for t in ledger.liveness.recover_stale([S32])] == [trial.number]


def test_heartbeats_missed_during_an_outage_are_excused_for_one_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"  # a database: wrapped in the retry storage
    clock = FakeClock()
    worker = ledger_as(url, "host-a", clock, monkeypatch)
    slot = worker.claim(S32, budget=2, grace=GRACE)
    assert slot is not None and worker.liveness.beat(slot, GRACE)
    other = ledger_as(url, "host-b", clock, monkeypatch)
    (running,) = other.liveness.running([S32])
    clock.advance(GRACE + 30)  # no beat got through: the storage was away for 80 s
    outage = other.storage.outage
    outage.now = clock.now
    outage.since = outage.monotonic() - 80.0
    outage.answered(outage.monotonic())  # host-b saw it come back now
    assert other.liveness.alive(running) and other.liveness.recover_stale([S32]) == []
    clock.advance(GRACE)
    assert other.liveness.alive(running)  # one grace from when it answered
    clock.advance(0.001)
    assert not other.liveness.alive(running)
    assert [t.number for t in other.liveness.recover_stale([S32])] == [slot.number]
