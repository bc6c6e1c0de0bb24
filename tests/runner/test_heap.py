"""`study.runner.heap`: the collector is off while a run starts, and on again, with what the start
made frozen, once the preflight has passed; a start that fails leaves it as it was."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from study.commands.run import run_config
from study.config.studyfile import parse_study
from study.errors import UsageError
from study.runner import heap, launch, spawning
from tests.runner.test_oracle_process import STUDY as ORACLE_STUDY

STUDY = {**ORACLE_STUDY, "name": "heap"}  # nothing trains: the preflight and run are replaced


@pytest.fixture(autouse=True)
def frozen() -> Iterator[int]:
    """How many objects were frozen before the test (a test process forked from a frozen
    parent has some; a frozen object freed since lowers the count, so "nothing frozen" reads
    as at most that many), the collector on; after the test it is as it was, and what the test
    froze is thawed if nothing was frozen before."""
    was_on, before = gc.isenabled(), gc.get_freeze_count()
    gc.enable()
    yield before
    if before == 0 and gc.get_freeze_count() > 0:
        gc.unfreeze()
    (gc.enable if was_on else gc.disable)()


def test_paused_turns_the_collector_off_and_on_again(frozen: int) -> None:
    with heap.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() <= frozen  # nothing settled: nothing frozen


def test_settle_freezes_what_exists_and_turns_the_collector_on(frozen: int) -> None:
    kept = [[] for _ in range(1000)]  # objects made before the pause
    with heap.paused():
        made = [[] for _ in range(1000)]  # and while paused
        heap.settle()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(kept) + len(made)
        heap.settle()  # once only
    assert gc.isenabled()


def test_a_failed_start_turns_the_collector_on_again(frozen: int) -> None:
    with pytest.raises(UsageError), heap.paused():
        raise UsageError("study.yaml: target: unknown metric")
    assert gc.isenabled()
    assert gc.get_freeze_count() <= frozen


def test_a_collector_the_caller_turned_off_stays_off(frozen: int) -> None:
    gc.disable()
    with heap.paused():
        heap.settle()
        assert not gc.isenabled()
        assert gc.get_freeze_count() <= frozen
    assert not gc.isenabled()


def test_settle_outside_a_pause_does_nothing(frozen: int) -> None:
    heap.settle()
    assert gc.isenabled()
    assert gc.get_freeze_count() <= frozen


def run_args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(
        storage=str(tmp_path / "optuna.journal"),
        tracking_uri=(tmp_path / "mlruns").as_uri(),
        workers=1,
        max_trials=None,
        trials=None,
    )


def test_study_run_starts_paused_and_settles_after_the_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen: int
) -> None:
    seen: dict[str, object] = {}

    def preflight(config: object, pool: object) -> None:
        seen["preflight"] = gc.isenabled()

    def run(*args: object, **kwargs: object) -> int:
        seen["run"] = gc.isenabled()
        seen["frozen"] = gc.get_freeze_count()
        return 0

    monkeypatch.setattr(spawning, "warm", lambda: None)  # no trainer server: nothing trains
    monkeypatch.setattr(launch, "preflight", preflight)
    monkeypatch.setattr(launch, "_run", run)
    config = parse_study(STUDY, "heap.yaml")
    assert run_config(config, run_args(tmp_path), tuner="optuna") == 0

    assert seen["preflight"] is False  # the start ran with the collector off
    assert seen["run"] is True  # the set-up and the trials with it on
    assert isinstance(seen["frozen"], int) and seen["frozen"] > frozen  # the start's objects
    assert gc.isenabled()


def test_a_failed_preflight_leaves_the_collector_on_and_nothing_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen: int
) -> None:
    def preflight(config: object, pool: object) -> None:
        raise UsageError("heap.yaml: target: unknown metric 'val_top5'")

    monkeypatch.setattr(spawning, "warm", lambda: None)
    monkeypatch.setattr(launch, "preflight", preflight)
    with pytest.raises(UsageError, match="val_top5"):
        run_config(parse_study(STUDY, "heap.yaml"), run_args(tmp_path), tuner="optuna")
    assert gc.isenabled()
    assert gc.get_freeze_count() <= frozen
