"""Heartbeats: a running trial carries its owner's last stamp; a trial whose owner is on
another host and missed its grace is closed as interrupted, on a journal and on an RDB
(SQLite) storage alike. Hosts are told apart by ``$STUDY_HOST``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState as OptunaState

from study.config.space import Stratum
from study.ledger import Ledger, StudyRecord
from study.ledger.owners import HOST_ENV, Beat, host_name, owner_alive, owner_id
from study.results import TrialState

S32 = Stratum(32, "default")


@pytest.fixture(params=["journal", "sqlite"])
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "journal":
        return str(tmp_path / "ledger.journal")
    return f"sqlite:///{tmp_path / 'ledger.db'}"


#: Long enough that a loaded machine (two test processes on two cores) never makes a fresh
#: trial look stale between two lines of a test; the dead-host test sleeps past it.
GRACE = 2.5
#: The beat interval of the long-trial test (its grace is four of them).
BEAT = 0.25


def ledger_as(url: str, host: str, monkeypatch: pytest.MonkeyPatch) -> Ledger:
    """The ledger of study ``s`` as a process on ``host`` opens it."""
    monkeypatch.setenv(HOST_ENV, host)
    ledger = Ledger.open(url, "s")
    ledger.create(StudyRecord("s", config_text="name: s", trials_total=2))
    return ledger


def test_a_beat_is_stale_only_after_its_grace() -> None:
    beat = Beat(at=100.0, grace=60.0)
    assert not beat.stale(now=160.0)
    assert beat.stale(now=160.001)
    assert Beat.from_stored(beat.to_stored()) == beat
    assert Beat.from_stored(None) is None
    assert Beat.from_stored({"at": "soon"}) is None


def test_owners_on_other_hosts_are_judged_by_their_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(HOST_ENV, "here")
    assert host_name() == "here"
    me = owner_id()
    assert me.startswith(f"here:{os.getpid()}:")
    now = time.time()
    assert owner_alive(me, Beat(now - 3600, 1.0))  # on its own host the process decides
    assert not owner_alive("here:999999999:0", Beat(now, 60.0))  # no such process here
    elsewhere = f"there:{os.getpid()}:0"
    assert owner_alive(elsewhere, Beat(now - 2, 3.0))
    assert not owner_alive(elsewhere, Beat(now - 4, 3.0))
    assert owner_alive(elsewhere)  # no heartbeat at all (an older ledger): assumed alive
    assert not owner_alive(None)


def test_a_dead_hosts_trial_is_recovered_after_the_grace(
    storage_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = ledger_as(storage_url, "host-a", monkeypatch)
    slot = worker.claim(S32, budget=2, grace=GRACE)
    assert slot is not None
    assert worker.beat(slot, GRACE)

    other = ledger_as(storage_url, "host-b", monkeypatch)
    (running,) = other.running([S32])
    assert running.owner == slot.owner and running.owner.startswith("host-a:")
    assert other.alive(running)
    assert other.recover_stale([S32]) == []  # fresh: left alone
    assert other.summary().strata[0].running == 1

    time.sleep(GRACE + 0.3)  # host-a stops beating: after the grace its trial is stale
    assert not other.alive(running)
    assert other.summary().strata[0].running == 0
    (recovered,) = other.recover_stale([S32])
    assert recovered.number == slot.number
    after = other.trials(S32)[slot.number]
    assert (after.status, after.open) == (TrialState.INTERRUPTED, False)
    assert other.storage.get_trial(other._trial_id(S32, slot.number)).state is OptunaState.FAIL
    assert other.running([S32]) == [] and other.recover_stale([S32]) == []
    assert other.remaining(S32, 2) == 2  # its slot runs again

    monkeypatch.setenv(HOST_ENV, "host-a")
    assert not worker.beat(slot, GRACE)  # the late owner learns its trial was taken


def test_beats_keep_a_long_trial_alive(storage_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    worker = ledger_as(storage_url, "host-a", monkeypatch)
    slot = worker.claim(S32, budget=2, grace=4 * BEAT)
    assert slot is not None
    other = ledger_as(storage_url, "host-b", monkeypatch)
    for _ in range(8):  # twice the grace in all, stamped every quarter of it
        time.sleep(BEAT)
        assert worker.beat(slot, 4 * BEAT)
        assert other.recover_stale([S32]) == []
    assert other.alive(other.running([S32])[0])
