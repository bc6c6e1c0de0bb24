"""The reads of each stratum a process keeps: amended by its own closes, and never overwritten
by a read that began before one of its changes (`study.ledger.reads`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from optuna.trial import TrialState as OptunaState

from study.ledger.reads import KeptReads


@dataclass(frozen=True)
class Stored:
    """What a kept read holds of a stored trial here: its id and state."""

    number: int
    state: OptunaState


def id_of_trial(trial: Any) -> int:
    return trial.number


def trials(*states: OptunaState) -> list[Any]:
    return [Stored(number, state) for number, state in enumerate(states)]


def test_a_read_begun_before_a_change_is_not_kept() -> None:
    reads: KeptReads[str] = KeptReads(id_of_trial)
    before = reads.generation("b32")
    reads.forget("b32")  # this process claimed in b32 while the read ran
    assert not reads.keep("b32", before, 1.0, trials(OptunaState.RUNNING))
    assert reads.get("b32") is None
    now = reads.generation("b32")
    assert reads.keep("b32", now, 2.0, trials(OptunaState.RUNNING)) and reads.get("b32")


def test_a_close_amends_the_kept_read_and_refuses_an_older_one() -> None:
    reads: KeptReads[str] = KeptReads(id_of_trial)
    open_read = trials(OptunaState.COMPLETE, OptunaState.RUNNING)
    assert reads.keep("b32", reads.generation("b32"), 1.0, open_read)
    under_way = reads.generation("b32")  # another thread starts reading
    closed = trials(OptunaState.COMPLETE, OptunaState.PRUNED)[1]
    reads.closed("b32", closed)
    kept = reads.get("b32")
    assert kept is not None and kept[0] == 1.0
    assert [t.state for t in kept[1]] == [OptunaState.COMPLETE, OptunaState.PRUNED]
    assert not reads.keep("b32", under_way, 2.0, open_read)  # would undo the close
    assert reads.get("b32") == kept


def test_two_threads_closing_trials_of_one_stratum_keep_both() -> None:
    reads: KeptReads[str] = KeptReads(id_of_trial)
    n = 40
    assert reads.keep("b32", 0, 1.0, trials(*[OptunaState.RUNNING] * n))
    ended = trials(*[OptunaState.COMPLETE] * n)
    threads = [
        threading.Thread(target=lambda part=part: [reads.closed("b32", t) for t in part])
        for part in (ended[::2], ended[1::2])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = reads.get("b32")
    assert kept is not None and all(t.state is OptunaState.COMPLETE for t in kept[1])
    assert reads.generation("b32") == n
