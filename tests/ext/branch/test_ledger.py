"""The branch queue in the ledger (`study.ext.branch.ledger`): one creator runs the reference,
notes are JSON, every queued branch is claimed exactly once by threads racing for it, outcomes
are read back, and a branch whose process died is queued again once."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from study.ext.branch.ledger import OWNER, BranchLedger


def ledger(tmp_path: Path, name: str = "s") -> BranchLedger:
    return BranchLedger.open(str(tmp_path / "optuna.journal"), name)


def test_one_creator_and_notes(tmp_path: Path) -> None:
    first, second = ledger(tmp_path), ledger(tmp_path)
    assert not first.exists() and first.note("plan") is None
    assert first.begin() is True and second.begin() is False
    first.set_note("reference", {"run_id": "abc", "checkpoints": [{"index": 0}]})
    assert second.note("reference") == {"run_id": "abc", "checkpoints": [{"index": 0}]}
    first.delete()
    assert not second.exists() and second.begin() is True


def test_racing_threads_claim_every_branch_once(tmp_path: Path) -> None:
    queue = ledger(tmp_path)
    queue.begin()
    queue.enqueue([{"checkpoint": i // 4, "batch_size": 8 << (i % 4)} for i in range(24)])
    taken: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work() -> None:
        mine = ledger(tmp_path)  # each its own handle, as each process has
        while (claimed := mine.claim()) is not None:
            trial, task = claimed
            mine.finish(trial, {"val_loss": 1.0 / task["batch_size"]}, 1.0 / task["batch_size"])
            with lock:
                taken.append((task["checkpoint"], task["batch_size"]))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == sorted({(i // 4, 8 << (i % 4)) for i in range(24)})
    tasks = queue.tasks()
    assert len(tasks) == 24 and {t.state for t in tasks} == {"complete"}
    assert all(t.outcome["val_loss"] == 1.0 / t.task["batch_size"] for t in tasks)
    assert queue.waiting() == queue.running() == 0


def test_a_branch_whose_process_died_is_queued_again_once(tmp_path: Path) -> None:
    queue = ledger(tmp_path)
    queue.begin()
    queue.enqueue([{"checkpoint": 0, "batch_size": 8}, {"checkpoint": 0, "batch_size": 16}])
    trial, task = queue.claim()
    alive, _ = queue.claim()
    assert queue.recover() == 0  # both owners (this process) live
    trial.set_user_attr(OWNER, f"{socket.gethostname()}:999999999:0")  # a process that is gone
    assert queue.recover() == 1 and ledger(tmp_path).recover() == 0
    assert queue.waiting() == 1 and queue.running() == 1
    again, same = queue.claim()
    assert same == task
    states = [t.state for t in queue.tasks()]
    assert states.count("fail") == 1 and states.count("running") == 2
    queue.finish(again, {"val_loss": 0.5}, 0.5)
    queue.fail(alive, "a bad branch")
    assert [t.error for t in queue.tasks() if t.state == "fail"] == [
        "its process died; queued again",
        "a bad branch",
    ]


def test_a_round_queues_only_the_branches_not_held_already(tmp_path: Path) -> None:
    queue = ledger(tmp_path)
    queue.begin()
    first = [{"checkpoint": 0, "batch_size": b, "replicate": 0, "lr_factor": 1.0} for b in (8, 16)]
    assert queue.enqueue_new(first) == 2
    trial, _task = queue.claim()  # type: ignore[misc]
    queue.finish(trial, {"val_loss": 1.0}, 1.0)
    again = [*first, {"checkpoint": 0, "batch_size": 8, "replicate": 1, "lr_factor": 1.0}]
    assert queue.enqueue_new(again) == 1  # one finished, one waiting: only replicate 1 is new
    assert queue.waiting() == 2
    failed_trial, failed = queue.claim()  # type: ignore[misc]
    queue.fail(failed_trial, "boom")
    assert queue.enqueue_new([failed]) == 1  # a failed branch is no branch held
